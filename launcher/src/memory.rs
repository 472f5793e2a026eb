//! What this machine can hold. A job whose vectors do not fit is refused in one line before it
//! starts: past the memory available the kernel kills ranks one by one (a benchmark then
//! reports deaths, not times), and a failed allocation aborts the process with a backtrace.

use anyhow::bail;

/// Copies of its vector a rank of the built-in job or a benchmark holds at least: the input
/// kept for the next operation and the vector reduced (out of place, the input and the output).
pub const VECTOR_COPIES_PER_RANK: u64 = 2;

/// `MemAvailable` of /proc/meminfo, in bytes; `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses `ranks` vectors of `vector_bytes` each (times [`VECTOR_COPIES_PER_RANK`]) beyond
/// `available`; `what` names the job in the message, `advice` says what to change.
pub fn ensure_fits(
    what: &str,
    ranks: u64,
    vector_bytes: u64,
    available: Option<u64>,
    advice: &str,
) -> anyhow::Result<()> {
    let Some(available) = available else {
        return Ok(());
    };
    let need = vector_bytes
        .saturating_mul(VECTOR_COPIES_PER_RANK)
        .saturating_mul(ranks);
    if need > available {
        let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
        bail!(
            "{what} needs {:.1} GiB here ({ranks} ranks x {VECTOR_COPIES_PER_RANK} copies of \
             {vector_bytes} bytes), more than the {:.1} GiB available; {advice}",
            gib(need),
            gib(available)
        );
    }
    Ok(())
}

/// [`ensure_fits`] for a benchmark's largest case: the most ranks of `sizes`, each with the
/// most bytes of `bytes`; `flags` are the `--sizes` and `--bytes` text, for the message.
pub fn ensure_bench_fits(flags: (&str, &str), sizes: &[u32], bytes: &[u64]) -> anyhow::Result<()> {
    let most_ranks = sizes.iter().copied().max().unwrap_or(0);
    let most_bytes = bytes.iter().copied().max().unwrap_or(0);
    ensure_fits(
        &format!("--sizes {} --bytes {}", flags.0, flags.1),
        u64::from(most_ranks),
        most_bytes,
        available_bytes(),
        "lower the largest --bytes or --sizes",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_refused_only_past_the_memory_available() {
        let gib = 1u64 << 30;
        assert!(ensure_fits("job", 4, gib, Some(8 * gib), "lower it").is_ok());
        let refused = ensure_fits("job", 4, gib, Some(8 * gib - 1), "lower it").unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains("8.0 GiB here") && text.ends_with("lower it"),
            "{text}"
        );
        assert!(ensure_fits("job", 4, u64::MAX, None, "lower it").is_ok());
        assert!(ensure_fits("job", u64::MAX, u64::MAX, Some(gib), "lower it").is_err());
    }
}
