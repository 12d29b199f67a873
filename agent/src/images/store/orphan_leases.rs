//! Leases of pulls whose agent process died (SIGKILL, OOM, node reboot) would pin partial
//! content for a day. Each pull lease names the agent process that owns it (host PID and
//! that process's start time, so a reused PID is not mistaken for the owner); an agent
//! starting up releases the leases of owners that are gone. Several agents may share one
//! containerd (tests), so only leases of dead processes are touched. The DaemonSet runs
//! with hostPID, so PIDs are the host's.

use std::collections::HashMap;

/// Label with the owning process, `<pid>:<start time in clock ticks since boot>`.
pub const OWNER_LABEL: &str = "stevedore.dev/agent-process";

/// `<pid>:<starttime>` of this process.
pub fn this_process() -> Option<String> {
    let pid = std::process::id();
    process_start(pid).map(|start| format!("{pid}:{start}"))
}

/// Field 22 of `/proc/<pid>/stat`: the process's start time since boot.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// The start time from a `/proc/<pid>/stat` line; the command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its closing parenthesis.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // Fields after comm start at field 3 (state); starttime is field 22.
    after_comm.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether the process named by an owner label value still runs.
fn owner_alive(owner: &str, start_of: &impl Fn(u32) -> Option<u64>) -> bool {
    let Some((pid, start)) = owner.split_once(':') else {
        return true; // Not ours to judge.
    };
    match (pid.parse::<u32>(), start.parse::<u64>()) {
        (Ok(pid), Ok(start)) => start_of(pid) == Some(start),
        _ => true,
    }
}

/// The IDs among `leases` (id, labels) owned by processes that no longer run.
pub fn orphaned<'a>(
    leases: impl IntoIterator<Item = (&'a str, &'a HashMap<String, String>)>,
    start_of: impl Fn(u32) -> Option<u64>,
) -> Vec<String> {
    leases
        .into_iter()
        .filter(|(_, labels)| {
            labels
                .get(OWNER_LABEL)
                .is_some_and(|owner| !owner_alive(owner, &start_of))
        })
        .map(|(id, _)| id.to_owned())
        .collect()
}

/// Looks the start time up in `/proc`.
pub fn proc_start_of(pid: u32) -> Option<u64> {
    process_start(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_even_with_spaces_in_the_command() {
        let stat = "4242 (stevedore (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 \
                    8 0 987654 123456 789";
        assert_eq!(parse_start_time(stat), Some(987_654));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn only_leases_of_dead_or_replaced_owners_are_orphaned() {
        let label = |v: &str| HashMap::from([(OWNER_LABEL.to_owned(), v.to_owned())]);
        let alive = label("10:500");
        let dead = label("11:600");
        let reused_pid = label("12:700");
        let foreign = HashMap::new();
        let malformed = label("x");
        let start_of = |pid: u32| match pid {
            10 => Some(500),
            12 => Some(701), // PID reused by a newer process
            _ => None,
        };
        let leases = [
            ("alive", &alive),
            ("dead", &dead),
            ("reused", &reused_pid),
            ("foreign", &foreign),
            ("malformed", &malformed),
        ];
        assert_eq!(orphaned(leases, start_of), vec!["dead", "reused"]);
    }

    #[test]
    fn this_process_is_alive_by_its_own_label() {
        let me = this_process().expect("/proc is readable");
        assert!(owner_alive(&me, &proc_start_of));
    }
}
