//! API credentials: read from a file (`greenpipe_common::secret`) or an environment variable,
//! never from the command line (where `ps` and shell history would show them).

use std::path::Path;

/// Reads a secret: the file wins when given (surrounding whitespace trimmed), else the environment
/// variable. `Ok(None)` when neither is set; an unreadable or empty file is an error.
pub fn load(file: Option<&Path>, env_var: &str) -> Result<Option<String>, crate::Error> {
    if let Some(path) = file {
        return Ok(Some(greenpipe_common::secret::read_secret_file(path)?));
    }
    Ok(std::env::var(env_var).ok().filter(|s| !s.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_is_trimmed_and_empty_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "s3cret\n").unwrap();
        assert_eq!(
            load(Some(&p), "GREENPIPE_TEST_UNSET_VAR")
                .unwrap()
                .as_deref(),
            Some("s3cret")
        );
        std::fs::write(&p, "\n").unwrap();
        assert!(load(Some(&p), "GREENPIPE_TEST_UNSET_VAR").is_err());
        assert!(load(Some(&dir.path().join("missing")), "X").is_err());
        assert_eq!(load(None, "GREENPIPE_TEST_UNSET_VAR").unwrap(), None);
    }
}
