/* See shim.h: one-line forwards to libfabric's static-inline calls. */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct fi_info *ftcoll_fi_allocinfo(void) { return fi_allocinfo(); }

char *ftcoll_fi_strdup(const char *s) { return strdup(s); }

int ftcoll_fi_close(struct fid *fid) { return fi_close(fid); }

int ftcoll_fi_control(struct fid *fid, int command, void *arg)
{
	return fi_control(fid, command, arg);
}

int ftcoll_fi_domain(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context)
{
	return fi_domain(fabric, info, domain, context);
}

int ftcoll_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		      struct fid_cq **cq, void *context)
{
	return fi_cq_open(domain, attr, cq, context);
}

int ftcoll_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		      struct fid_av **av, void *context)
{
	return fi_av_open(domain, attr, av, context);
}

int ftcoll_fi_av_insert(struct fid_av *av, const void *addr, size_t count,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return fi_av_insert(av, addr, count, fi_addr, flags, context);
}

int ftcoll_fi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count,
			uint64_t flags)
{
	return fi_av_remove(av, fi_addr, count, flags);
}

int ftcoll_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len,
		     uint64_t access, uint64_t offset, uint64_t requested_key,
		     uint64_t flags, struct fid_mr **mr, void *context)
{
	return fi_mr_reg(domain, buf, len, access, offset, requested_key,
			 flags, mr, context);
}

void *ftcoll_fi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }

uint64_t ftcoll_fi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }

int ftcoll_fi_endpoint(struct fid_domain *domain, struct fi_info *info,
		       struct fid_ep **ep, void *context)
{
	return fi_endpoint(domain, info, ep, context);
}

int ftcoll_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags)
{
	return fi_ep_bind(ep, bfid, flags);
}

int ftcoll_fi_enable(struct fid_ep *ep) { return fi_enable(ep); }

ssize_t ftcoll_fi_cancel(fid_t fid, void *context)
{
	return fi_cancel(fid, context);
}

int ftcoll_fi_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return fi_getname(fid, addr, addrlen);
}

ssize_t ftcoll_fi_tsend(struct fid_ep *ep, const void *buf, size_t len,
			void *desc, fi_addr_t dest_addr, uint64_t tag,
			void *context)
{
	return fi_tsend(ep, buf, len, desc, dest_addr, tag, context);
}

ssize_t ftcoll_fi_tsendv(struct fid_ep *ep, const struct iovec *iov,
			 void **desc, size_t count, fi_addr_t dest_addr,
			 uint64_t tag, void *context)
{
	return fi_tsendv(ep, iov, desc, count, dest_addr, tag, context);
}

ssize_t ftcoll_fi_tsenddata(struct fid_ep *ep, const void *buf, size_t len,
			    void *desc, uint64_t data, fi_addr_t dest_addr,
			    uint64_t tag, void *context)
{
	return fi_tsenddata(ep, buf, len, desc, data, dest_addr, tag, context);
}

ssize_t ftcoll_fi_tinject(struct fid_ep *ep, const void *buf, size_t len,
			  fi_addr_t dest_addr, uint64_t tag)
{
	return fi_tinject(ep, buf, len, dest_addr, tag);
}

ssize_t ftcoll_fi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			void *context)
{
	return fi_trecv(ep, buf, len, desc, src_addr, tag, ignore, context);
}

ssize_t ftcoll_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
		       fi_addr_t src_addr, uint64_t addr, uint64_t key,
		       void *context)
{
	return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}

ssize_t ftcoll_fi_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	return fi_cq_read(cq, buf, count);
}

ssize_t ftcoll_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			     uint64_t flags)
{
	return fi_cq_readerr(cq, buf, flags);
}

const char *ftcoll_fi_cq_strerror(struct fid_cq *cq, int prov_errno,
				  const void *err_data, char *buf, size_t len)
{
	return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}

int ftcoll_fi_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	return fi_trywait(fabric, fids, count);
}
