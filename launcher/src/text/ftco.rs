//! FTCO's tree and service-distance options as users type them (`knomial:4`, `rsd:0.25`).

use ftcoll_algos::ftco::ServiceDistance;
use ftcoll_algos::topology::TreeShape;

/// Parses `kary:K` or `knomial:K` (K >= 2).
pub fn parse_shape(text: &str) -> Result<TreeShape, String> {
    let bad = || format!("unknown FTCO tree '{text}': use kary:K or knomial:K with K >= 2");
    let (kind, radix) = text.split_once(':').ok_or_else(bad)?;
    let k: u32 = radix.parse().map_err(|_| bad())?;
    if k < 2 {
        return Err(bad());
    }
    match kind {
        "kary" => Ok(TreeShape::KAry { k }),
        "knomial" => Ok(TreeShape::KNomial { k }),
        _ => Err(bad()),
    }
}

/// Parses `rsd`, `rsd:R` (0 < R <= 1/2) or `disd`.
pub fn parse_service(text: &str) -> Result<ServiceDistance, String> {
    let bad =
        || format!("unknown service distance '{text}': use rsd, rsd:R with 0 < R <= 0.5, or disd");
    match text.split_once(':') {
        None if text == "rsd" => Ok(ServiceDistance::Rsd { ratio: 0.5 }),
        None if text == "disd" => Ok(ServiceDistance::Disd),
        Some(("rsd", ratio)) => {
            let ratio: f64 = ratio.parse().map_err(|_| bad())?;
            if ratio > 0.0 && ratio <= 0.5 {
                Ok(ServiceDistance::Rsd { ratio })
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn shapes_and_services_parse_and_bad_ones_say_what_to_use() {
        assert_eq!(parse_shape("knomial:4"), Ok(TreeShape::KNomial { k: 4 }));
        assert_eq!(parse_shape("kary:2"), Ok(TreeShape::KAry { k: 2 }));
        for bad in ["knomial", "kary:1", "ring:3", "knomial:x", ""] {
            let error = parse_shape(bad).unwrap_err();
            assert!(error.contains("kary:K or knomial:K"), "{bad}: {error}");
        }
        assert_eq!(
            parse_service("rsd"),
            Ok(ServiceDistance::Rsd { ratio: 0.5 })
        );
        assert_eq!(
            parse_service("rsd:0.25"),
            Ok(ServiceDistance::Rsd { ratio: 0.25 })
        );
        assert_eq!(parse_service("disd"), Ok(ServiceDistance::Disd));
        for bad in ["rsd:0.7", "rsd:0", "fifo", "disd:2"] {
            assert!(parse_service(bad).is_err(), "{bad}");
        }
    }
}
