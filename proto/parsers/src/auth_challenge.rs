//! Parameters of a registry's `WWW-Authenticate` challenge (`Bearer realm="...",
//! service="...",scope="..."`), read the way Docker's and containerd's clients read them:
//! a value quoted or not, parameters separated by commas, names in any case.

/// A `name="value"` (or unquoted) parameter of a `WWW-Authenticate` challenge.
pub fn challenge_param(params: &str, name: &str) -> Option<String> {
    let mut rest = params;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().trim_start_matches(',').trim();
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if key.eq_ignore_ascii_case(name) {
            return Some(value.to_owned());
        }
        rest = after.trim_start_matches(',').trim_start();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_are_read() {
        let params = r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#;
        assert_eq!(
            challenge_param(params, "realm").as_deref(),
            Some("https://auth.example/token")
        );
        assert_eq!(
            challenge_param(params, "service").as_deref(),
            Some("registry.example")
        );
        assert_eq!(
            challenge_param(params, "scope").as_deref(),
            Some("repository:a/b:pull")
        );
        assert_eq!(challenge_param(params, "missing"), None);
        assert_eq!(
            challenge_param("realm=plain,service=x", "service").as_deref(),
            Some("x")
        );
    }
}
