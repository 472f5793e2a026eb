//! What a killed rank process leaves behind on this machine, and its removal: shared by the
//! launcher (its own children), the node agents (theirs) and `bench transport`.

/// Removes what libfabric's shm provider left in /dev/shm for process `pid` (files named
/// `PID:...`): a process killed while using it cannot remove them itself.
pub fn remove_provider_shm_files(pid: u32) {
    let prefix = format!("{pid}:");
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
