//! The address a rank publishes: `ofi:<provider>:<hex of its endpoint name>`.

use ftcoll_algos::Rank;

use crate::TransportError;

/// Lower-case hexadecimal of `bytes`.
pub(super) fn hex_encode(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// Decodes a peer address from [`Transport::local_address`], checking it names `provider`.
pub(super) fn parse_address(
    address: &str,
    provider: &str,
    rank: Rank,
) -> Result<Vec<u8>, TransportError> {
    let bad = |why: String| TransportError::Resolve { rank: rank.0, why };
    let rest = address.strip_prefix("ofi:").ok_or_else(|| {
        bad(format!(
            "'{address}' is not a libfabric address (ofi:<provider>:<hex>)"
        ))
    })?;
    let (theirs, hex) = rest
        .rsplit_once(':')
        .ok_or_else(|| bad(format!("'{address}' has no provider part")))?;
    if theirs != provider {
        return Err(bad(format!("the peer uses provider {theirs}, this rank {provider}; set the same FI_PROVIDER for all ranks")));
    }
    if hex.is_empty() || hex.len() % 2 != 0 {
        return Err(bad(format!("'{address}' has an odd or empty name")));
    }
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad(format!("'{address}' is not hexadecimal")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_reject_other_providers() {
        let name = [0u8, 1, 0xab, 0xff];
        let address = format!("ofi:tcp;ofi_rxm:{}", hex_encode(&name));
        assert_eq!(
            parse_address(&address, "tcp;ofi_rxm", Rank(1)).unwrap(),
            name
        );
        for bad in [
            address.as_str(),
            "tcp:00",
            "ofi:tcp;ofi_rxm:0",
            "ofi:tcp;ofi_rxm:zz",
        ] {
            assert!(parse_address(
                bad,
                if bad == address { "shm" } else { "tcp;ofi_rxm" },
                Rank(1)
            )
            .is_err());
        }
    }
}
