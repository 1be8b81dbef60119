//! Keeping a listener's connections inside the process's file-descriptor limit: the soft limit
//! is raised to the hard one once (as Go's runtime does; containers often start at a soft 1,024
//! under a hard limit of 512 Ki or more), and a listener takes at most a quarter of it, leaving
//! room for a second listener, the API client's connections and files.

use std::sync::OnceLock;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The soft limit on open files after raising it to the hard limit (`None`: unlimited).
pub fn raise_nofile_limit() -> Option<u64> {
    static RAISED: OnceLock<Option<u64>> = OnceLock::new();
    *RAISED.get_or_init(|| {
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => return limit.maximum,
                Err(e) => tracing::debug!(error = %e, "cannot raise the open-files limit"),
            }
        }
        limit.current
    })
}

/// `wanted` connections, or fewer if a quarter of the open-files limit is smaller.
pub fn connection_cap(wanted: usize) -> usize {
    let Some(files) = raise_nofile_limit() else {
        return wanted;
    };
    let fits = usize::try_from(files / 4).unwrap_or(usize::MAX).max(1);
    if fits < wanted {
        tracing::warn!(
            wanted,
            open_files_limit = files,
            cap = fits,
            "fewer connections allowed than configured, to stay inside the open-files limit"
        );
    }
    wanted.min(fits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_to_the_hard_limit_and_caps_by_it() {
        let hard = getrlimit(Resource::Nofile).maximum;
        assert_eq!(raise_nofile_limit(), hard);
        assert_eq!(getrlimit(Resource::Nofile).current, hard);
        if let Some(hard) = hard {
            let quarter = usize::try_from(hard / 4).unwrap();
            assert_eq!(connection_cap(usize::MAX), quarter);
            assert_eq!(connection_cap(1), 1);
        }
    }
}
