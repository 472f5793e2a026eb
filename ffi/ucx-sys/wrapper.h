/* Everything ftcoll-ucx-sys binds: the UCP API, status codes, UCT's resource queries and the
 * shim's out-of-line copies of inline functions. */
#include <ucp/api/ucp.h>
#include <ucs/type/status.h>
#include <uct/api/uct.h>
#include "shim.h"
