#![allow(clippy::unwrap_used)]

use super::*;

fn upstream() -> Endpoint {
    Endpoint::upstream("https://registry.example".to_owned())
}

fn parse(text: &str) -> Result<Vec<Endpoint>, HostsError> {
    endpoints("registry.example", Some(text), "hosts.toml", upstream())
}

/// (origin, path, pull, resolve) of an endpoint.
type Row = (String, String, bool, bool);

/// [`Row`]s of the endpoints, in order.
fn summary(list: &[Endpoint]) -> Vec<Row> {
    list.iter()
        .map(|e| {
            let caps = e.capabilities;
            (e.origin.clone(), e.path.clone(), caps.pull, caps.resolve)
        })
        .collect()
}

fn row(origin: &str, path: &str, pull: bool, resolve: bool) -> Row {
    (origin.to_owned(), path.to_owned(), pull, resolve)
}

#[test]
fn without_a_file_the_registry_itself_is_the_only_endpoint() {
    let list = endpoints("registry.example", None, "x", upstream()).unwrap();
    assert_eq!(list, [upstream()]);
}

#[test]
fn hosts_come_in_file_order_before_the_server() {
    let cases: [(&str, Vec<Row>); 6] = [
        (
            r#"
server = "https://upstream.example"
[host."http://127.0.0.1:5001"]
  capabilities = ["pull", "resolve"]
[host."https://b.example"]
  capabilities = ["pull"]
[host."a.example"]
"#,
            vec![
                row("http://127.0.0.1:5001", "/v2", true, true),
                row("https://b.example", "/v2", true, false),
                row("https://a.example", "/v2", true, true),
                row("https://upstream.example", "/v2", true, true),
            ],
        ),
        (
            r#"[host."https://m.example/registry"]"#,
            vec![
                row("https://m.example", "/registry/v2", true, true),
                row("https://registry.example", "/v2", true, true),
            ],
        ),
        (
            r#"[host."https://m.example/custom/path"]
override_path = true"#,
            vec![
                row("https://m.example", "/custom/path", true, true),
                row("https://registry.example", "/v2", true, true),
            ],
        ),
        (
            r#"[host."https://m.example/v2/"]"#,
            vec![
                row("https://m.example", "/v2", true, true),
                row("https://registry.example", "/v2", true, true),
            ],
        ),
        (
            r#"server = "http://registry.example:5000""#,
            vec![row("http://registry.example:5000", "/v2", true, true)],
        ),
        (
            r#"capabilities = ["pull"]"#,
            vec![row("https://registry.example", "/v2", true, false)],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(summary(&parse(text).unwrap()), want, "{text}");
    }
}

#[test]
fn mirrors_are_told_which_registry_is_meant() {
    let list = parse(r#"[host."http://127.0.0.1:5001"]"#).unwrap();
    assert_eq!(
        list[0].url("team/app", "manifests/v1"),
        "http://127.0.0.1:5001/v2/team/app/manifests/v1?ns=registry.example"
    );
    assert_eq!(
        list[1].url("team/app", "manifests/v1"),
        "https://registry.example/v2/team/app/manifests/v1"
    );
    assert!(list[0].plain_http() && !list[1].plain_http());
}

#[test]
fn tls_settings_are_per_host() {
    let list = parse(
        r#"
ca = "/etc/ca/upstream.pem"
[host."https://a.example"]
  skip_verify = true
[host."https://b.example"]
  ca = ["/etc/ca/1.pem", "/etc/ca/2.pem"]
"#,
    )
    .unwrap();
    let tls: Vec<_> = list.iter().map(|e| e.tls.clone()).collect();
    assert_eq!(
        tls,
        [
            Tls {
                skip_verify: true,
                ca: vec![]
            },
            Tls {
                skip_verify: false,
                ca: vec!["/etc/ca/1.pem".into(), "/etc/ca/2.pem".into()]
            },
            Tls {
                skip_verify: false,
                ca: vec!["/etc/ca/upstream.pem".into()]
            },
        ]
    );
}

#[test]
fn tag_resolution_needs_resolve_and_digests_need_pull() {
    let list = parse(
        r#"
[host."https://pull-only.example"]
  capabilities = ["pull"]
[host."https://push-only.example"]
  capabilities = ["push"]
"#,
    )
    .unwrap();
    let origins = |resolve| -> Vec<&str> {
        able_to(&list, resolve)
            .iter()
            .map(|e| e.origin.as_str())
            .collect()
    };
    assert_eq!(origins(true), ["https://registry.example"]);
    assert_eq!(
        origins(false),
        ["https://pull-only.example", "https://registry.example"]
    );
}

#[test]
fn bad_files_name_the_file_and_the_field() {
    let cases = [
        ("host = 3", "`host` is not a table"),
        (
            r#"[host."https://m"]
capabilities = "pull""#,
            "`capabilities` is not a list",
        ),
        (
            r#"[host."https://m"]
capabilities = ["fly"]"#,
            "unknown capability \"fly\"",
        ),
        (
            r#"[host."https://m"]
skip_verify = "yes""#,
            "`skip_verify` is not true or false",
        ),
        ("ca = 3", "`ca` is neither a path nor a list of paths"),
        ("server = 3", "`server` is not a string"),
        (r#"[host."https:///v2"]"#, "does not name a host"),
        ("server = ", "hosts.toml is invalid"),
    ];
    for (text, want) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}: {err}");
        assert!(
            err.starts_with("registry configuration hosts.toml is invalid"),
            "{err}"
        );
    }
}

#[test]
fn the_registry_directory_wins_over_default() {
    let dir = std::env::temp_dir().join(format!("stevedore-hosts-{}", std::process::id()));
    let write = |sub: &str, text: &str| {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(dir.join(sub).join("hosts.toml"), text).unwrap();
    };
    assert_eq!(read_hosts_file(&dir, "r.example:5000").unwrap(), None);
    write("_default", "# default");
    let (path, text) = read_hosts_file(&dir, "r.example:5000").unwrap().unwrap();
    assert!(path.ends_with("_default/hosts.toml") && text == "# default");
    write("r.example:5000", "# own");
    let (_, text) = read_hosts_file(&dir, "r.example:5000").unwrap().unwrap();
    assert_eq!(text, "# own");
    std::fs::remove_dir_all(&dir).unwrap();
}
