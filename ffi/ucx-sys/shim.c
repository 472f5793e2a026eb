/*
 * Out-of-line copies of what UCX provides only as static inline functions or macros, so that
 * Rust can call them: bindgen binds declarations, not inline bodies.
 */
#include <ucp/api/ucp.h>
#include "shim.h"

/* ucp_init is static inline around ucp_init_version; this passes the header's API version. */
ucs_status_t ftcoll_ucp_init(const ucp_params_t *params, const ucp_config_t *config,
                             ucp_context_h *context_p)
{
    return ucp_init(params, config, context_p);
}

/*
 * The status a ucs_status_ptr_t stands for, as UCS_PTR_STATUS computes it: UCS_OK for NULL,
 * UCS_INPROGRESS for a request pointer, otherwise the error code.
 */
ucs_status_t ftcoll_ucs_ptr_status(ucs_status_ptr_t ptr)
{
    return UCS_PTR_STATUS(ptr);
}

/* Whether a ucs_status_ptr_t is an error code rather than NULL or a request (UCS_PTR_IS_ERR). */
int ftcoll_ucs_ptr_is_err(ucs_status_ptr_t ptr)
{
    return UCS_PTR_IS_ERR(ptr);
}
