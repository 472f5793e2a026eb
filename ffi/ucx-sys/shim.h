/* Out-of-line copies of UCX static inline functions and macros (shim.c); see shim.c. */
#ifndef FTCOLL_UCX_SHIM_H
#define FTCOLL_UCX_SHIM_H

#include <ucp/api/ucp.h>
#include <ucs/type/status.h>

ucs_status_t ftcoll_ucp_init(const ucp_params_t *params, const ucp_config_t *config,
                             ucp_context_h *context_p);
ucs_status_t ftcoll_ucs_ptr_status(ucs_status_ptr_t ptr);
int ftcoll_ucs_ptr_is_err(ucs_status_ptr_t ptr);

#endif
