/* Exported wrappers for libfabric calls that are static inline in its headers (almost the whole
 * data path dispatches through the provider's ops tables), so Rust can call them. Each wrapper
 * has the signature of the call it wraps, with an ftcoll_ prefix. */
#ifndef FTCOLL_OFI_SHIM_H
#define FTCOLL_OFI_SHIM_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

struct fi_info *ftcoll_fi_allocinfo(void);
/* strdup, so that strings placed in an fi_info are freed correctly by fi_freeinfo. */
char *ftcoll_fi_strdup(const char *s);
int ftcoll_fi_close(struct fid *fid);
int ftcoll_fi_control(struct fid *fid, int command, void *arg);

int ftcoll_fi_domain(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context);
int ftcoll_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		      struct fid_cq **cq, void *context);
int ftcoll_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		      struct fid_av **av, void *context);
int ftcoll_fi_av_insert(struct fid_av *av, const void *addr, size_t count,
			fi_addr_t *fi_addr, uint64_t flags, void *context);
int ftcoll_fi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
			uint64_t flags);
int ftcoll_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len,
		     uint64_t access, uint64_t offset, uint64_t requested_key,
		     uint64_t flags, struct fid_mr **mr, void *context);
void *ftcoll_fi_mr_desc(struct fid_mr *mr);
uint64_t ftcoll_fi_mr_key(struct fid_mr *mr);

int ftcoll_fi_endpoint(struct fid_domain *domain, struct fi_info *info,
		       struct fid_ep **ep, void *context);
int ftcoll_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int ftcoll_fi_enable(struct fid_ep *ep);
ssize_t ftcoll_fi_cancel(fid_t fid, void *context);
int ftcoll_fi_getname(fid_t fid, void *addr, size_t *addrlen);

ssize_t ftcoll_fi_tsend(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest_addr, uint64_t tag,
			void *context);
ssize_t ftcoll_fi_tsendv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 uint64_t tag, void *context);
ssize_t ftcoll_fi_tsenddata(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest_addr,
			    uint64_t tag, void *context);
ssize_t ftcoll_fi_tinject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t tag);
ssize_t ftcoll_fi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			void *context);

ssize_t ftcoll_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
		       fi_addr_t src_addr, uint64_t addr, uint64_t key,
		       void *context);

ssize_t ftcoll_fi_cq_read(struct fid_cq *cq, void *buf, size_t count);
ssize_t ftcoll_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			     uint64_t flags);
const char *ftcoll_fi_cq_strerror(struct fid_cq *cq, int prov_errno,
				  const void *err_data, char *buf, size_t len);
int ftcoll_fi_trywait(struct fid_fabric *fabric, struct fid **fids, int count);

#endif
