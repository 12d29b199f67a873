use super::*;

/// Golden values printed by Go's `hash/fnv` with Kubernetes' `ComputeHash` and
/// `HashControllerRevision` bodies and `rand.SafeEncodeString` (run locally, Go 1.x):
/// (data, collision count, ComputeHash, HashControllerRevision).
const GO_HASHES: &[(&str, Option<i32>, &str, &str)] = &[
    ("", None, "65bb57b6b5", "65bb57b6b5"),
    ("", Some(0), "6b5968754f", "d8bfb7bc"),
    ("", Some(1), "548d9d4bcb", "d8bfb7bb"),
    ("", Some(-1), "666c58f68f", "b55c9f8f9"),
    ("", Some(42), "7ff4999d99", "8f875b5b7"),
    ("{}", None, "5859f96865", "5894b84845"),
    ("{}", Some(0), "7b58f74dd9", "cccc864bc"),
    ("{}", Some(1), "648d6bd896", "cccc864bb"),
    ("{}", Some(-1), "6cb6c595bf", "7df4859cc5"),
    ("{}", Some(42), "794d4f9c6c", "84858587c9"),
    (
        r#"{"spec":{"template":{"$patch":"replace"}}}"#,
        None,
        "5c486558bb",
        "5c7586484",
    ),
    (
        r#"{"spec":{"template":{"$patch":"replace"}}}"#,
        Some(0),
        "5dff6b4c8b",
        "589f85db5b",
    ),
    (
        r#"{"spec":{"template":{"$patch":"replace"}}}"#,
        Some(1),
        "78b9f675cf",
        "589f85db5c",
    ),
    (
        r#"{"spec":{"template":{"$patch":"replace"}}}"#,
        Some(-1),
        "6f59dcc6db",
        "79cc59c898",
    ),
    (
        r#"{"spec":{"template":{"$patch":"replace"}}}"#,
        Some(42),
        "644b4f9f48",
        "7fb7486bf8",
    ),
    ("nginx:1.25", None, "56786994d9", "74589b694f"),
    ("nginx:1.25", Some(0), "685d578857", "6d766c99f5"),
    ("nginx:1.25", Some(1), "d958c5fd4", "6d766c99f4"),
    ("nginx:1.25", Some(-1), "54474fc4b9", "596f8b5787"),
    ("nginx:1.25", Some(42), "7458948547", "55879cb4c9"),
];

#[test]
fn hashes_match_kubernetes() {
    for (data, collision, compute, revision) in GO_HASHES {
        assert_eq!(
            compute_hash(data.as_bytes(), *collision),
            *compute,
            "ComputeHash({data:?}, {collision:?})"
        );
        assert_eq!(
            hash_revision_data(data.as_bytes(), *collision),
            *revision,
            "HashControllerRevision({data:?}, {collision:?})"
        );
    }
}

#[test]
fn fnv_reference_vectors() {
    let cases: &[(&str, u32, u32)] = &[
        ("", 0x811c_9dc5, 0x811c_9dc5),
        ("a", 0x050c_5d7e, 0xe40c_292c),
        ("foobar", 0x31f0_b262, 0xbf9c_f968),
    ];
    for (input, fnv1, fnv1a) in cases {
        assert_eq!(fnv32(input.as_bytes()), *fnv1, "fnv32({input:?})");
        assert_eq!(fnv32a(input.as_bytes()), *fnv1a, "fnv32a({input:?})");
    }
}

#[test]
fn safe_encode_maps_digits_into_the_alphabet() {
    assert_eq!(safe_encode("0123456789"), "456789bcdf");
    assert_eq!(safe_encode(""), "");
    let encoded = safe_encode(&u32::MAX.to_string());
    assert!(encoded.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
    assert!(!encoded.contains(['a', 'e', 'i', 'o', 'u', '0', '1', '3']));
}

#[test]
fn revision_names() {
    let cases: &[(&str, &str, &str)] = &[
        ("web", "5894b84845", "web-5894b84845"),
        ("my-app", "cccc864bc", "my-app-cccc864bc"),
        ("", "x", "-x"),
    ];
    for (parent, hash, want) in cases {
        assert_eq!(revision_name(parent, hash), *want);
    }
    let long = "a".repeat(300);
    let name = revision_name(&long, "5894b84845");
    assert_eq!(name.len(), 223 + 1 + 10);
    assert!(name.ends_with("-5894b84845"));
    // A multi-byte character across the cut is dropped whole, not split.
    let multibyte = format!("{}é", "a".repeat(222));
    assert_eq!(
        revision_name(&multibyte, "h"),
        format!("{}-h", "a".repeat(222))
    );
}

#[test]
fn short_hashes_and_label_matching() {
    let cases: &[(&str, &str)] = &[
        ("web-5894b84845", "5894b84845"),
        ("my-app-cccc864bc", "cccc864bc"),
        ("cccc864bc", "cccc864bc"),
        ("", ""),
        ("trailing-", ""),
    ];
    for (revision, short) in cases {
        assert_eq!(short_hash(revision), *short, "short_hash({revision:?})");
    }
    let matching: &[(Option<&str>, &str, bool)] = &[
        (Some("web-5894b84845"), "web-5894b84845", true),
        (Some("5894b84845"), "web-5894b84845", true),
        (Some("web-5894b84845"), "5894b84845", true),
        (Some("web-cccc864bc"), "web-5894b84845", false),
        (Some(""), "web-5894b84845", false),
        (None, "web-5894b84845", false),
    ];
    for (label, revision, want) in matching {
        assert_eq!(
            RevisionAdapter::label_names(*label, revision),
            *want,
            "{label:?} vs {revision}"
        );
    }
}

#[test]
fn template_data_replaces_the_whole_template() -> Result<(), RevisionError> {
    let template = serde_json::json!({"metadata": {"labels": {"app": "web"}}});
    let data = template_revision_data(&template)?;
    let parsed: serde_json::Value =
        serde_json::from_slice(&data).map_err(|source| RevisionError::Serialize { source })?;
    assert_eq!(parsed["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        parsed["spec"]["template"]["metadata"]["labels"]["app"],
        "web"
    );
    // Same template, same bytes: equal templates must find the same revision.
    assert_eq!(template_revision_data(&template)?, data);
    Ok(())
}

fn rev(name: &str, number: i64, data: &str) -> Revision {
    Revision {
        name: name.to_owned(),
        number,
        hash_label: None,
        data: data.as_bytes().to_vec(),
        created: None,
    }
}

#[test]
fn next_numbers() {
    let cases: &[(&[i64], i64)] = &[
        (&[], 1),
        (&[1], 2),
        (&[1, 2, 3], 4),
        (&[5, 2], 6),
        (&[7, 7], 8),
    ];
    for (numbers, want) in cases {
        let revisions: Vec<Revision> = numbers
            .iter()
            .map(|n| rev(&format!("r{n}"), *n, "{}"))
            .collect();
        assert_eq!(next_revision_number(&revisions), *want, "{numbers:?}");
    }
}

#[test]
fn sorting_breaks_ties_by_age_then_name() {
    let mut revisions = vec![
        Revision {
            created: Some(20),
            ..rev("b", 2, "")
        },
        Revision {
            created: Some(10),
            ..rev("c", 2, "")
        },
        rev("z", 1, ""),
        Revision {
            created: Some(10),
            ..rev("a", 2, "")
        },
    ];
    sort_revisions(&mut revisions);
    let names: Vec<&str> = revisions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["z", "a", "c", "b"]);
}

#[test]
fn equality_uses_data_unless_hash_labels_differ() {
    let a = rev("a", 1, "x");
    let cases = [
        (rev("b", 2, "x"), true),
        (rev("b", 2, "y"), false),
        (
            Revision {
                hash_label: Some("7".into()),
                ..rev("b", 2, "x")
            },
            true,
        ),
    ];
    for (b, want) in &cases {
        assert_eq!(equal_revision(&a, b), *want, "{b:?}");
    }
    let labelled = Revision {
        hash_label: Some("1".into()),
        ..rev("a", 1, "x")
    };
    let other = Revision {
        hash_label: Some("2".into()),
        ..rev("b", 2, "x")
    };
    assert!(!equal_revision(&labelled, &other));
    let unparsable = Revision {
        hash_label: Some("abc".into()),
        ..rev("b", 2, "x")
    };
    assert!(equal_revision(&labelled, &unparsable));
}

#[test]
fn update_revision_plans() {
    let v1 = rev("web-a", 1, "v1");
    let v2 = rev("web-b", 2, "v2");
    let v3 = rev("web-c", 3, "v3");
    let history = [v1.clone(), v2.clone(), v3.clone()];

    // Unchanged template: the newest revision is reused.
    assert_eq!(
        plan_update_revision("web", &history, b"v3", 0),
        UpdateRevisionPlan::Unchanged {
            name: "web-c".into()
        }
    );
    // Rollback to v1: renumbered above the newest, no new object.
    assert_eq!(
        plan_update_revision("web", &history, b"v1", 0),
        UpdateRevisionPlan::Renumber {
            name: "web-a".into(),
            number: 4
        }
    );
    // Unsorted input is sorted first.
    assert_eq!(
        plan_update_revision("web", &[v3.clone(), v1.clone(), v2.clone()], b"v2", 0),
        UpdateRevisionPlan::Renumber {
            name: "web-b".into(),
            number: 4
        }
    );
    // New template: a new revision named by the hash of its data.
    let hash = hash_revision_data(b"v4", Some(0));
    assert_eq!(
        plan_update_revision("web", &history, b"v4", 0),
        UpdateRevisionPlan::Create {
            name: format!("web-{hash}"),
            hash,
            number: 4,
            collision_count: 0
        }
    );
    // First revision of a new set.
    let plan = plan_update_revision("web", &[], b"v1", 0);
    assert!(
        matches!(plan, UpdateRevisionPlan::Create { number: 1, .. }),
        "{plan:?}"
    );
}

#[test]
fn name_collisions_bump_the_collision_count() {
    let taken = format!("web-{}", hash_revision_data(b"new", Some(0)));
    let also_taken = format!("web-{}", hash_revision_data(b"new", Some(1)));
    let history = [rev(&taken, 1, "other"), rev(&also_taken, 2, "another")];
    let free_hash = hash_revision_data(b"new", Some(2));
    assert_eq!(
        plan_update_revision("web", &history, b"new", 0),
        UpdateRevisionPlan::Create {
            name: format!("web-{free_hash}"),
            hash: free_hash,
            number: 3,
            collision_count: 2
        }
    );
    // A collision count already in status is where the search starts.
    let plan = plan_update_revision("web", &[], b"new", 5);
    assert!(
        matches!(
            plan,
            UpdateRevisionPlan::Create {
                collision_count: 5,
                ..
            }
        ),
        "{plan:?}"
    );
    assert_eq!(
        plan.name(),
        format!("web-{}", hash_revision_data(b"new", Some(5)))
    );
}

#[test]
fn current_revision_falls_back_to_update() {
    let history = [rev("web-a", 1, "v1"), rev("web-b", 2, "v2")];
    assert_eq!(current_revision_name(&history, "web-a", "web-b"), "web-a");
    assert_eq!(current_revision_name(&history, "", "web-b"), "web-b");
    assert_eq!(
        current_revision_name(&history, "web-gone", "web-b"),
        "web-b"
    );
}

#[test]
fn truncation_table() {
    let history: Vec<Revision> = (1..=6).map(|n| rev(&format!("web-h{n}"), n, "")).collect();
    struct Case {
        name: &'static str,
        current: &'static str,
        update: &'static str,
        pods: &'static [Option<&'static str>],
        limit: i32,
        want: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "within limit",
            current: "web-h6",
            update: "web-h6",
            pods: &[],
            limit: 10,
            want: &[],
        },
        Case {
            name: "exactly at limit",
            current: "web-h6",
            update: "web-h6",
            pods: &[],
            limit: 5,
            want: &[],
        },
        Case {
            name: "oldest first",
            current: "web-h6",
            update: "web-h6",
            pods: &[],
            limit: 3,
            want: &["web-h1", "web-h2"],
        },
        Case {
            name: "limit zero keeps only live",
            current: "web-h5",
            update: "web-h6",
            pods: &[],
            limit: 0,
            want: &["web-h1", "web-h2", "web-h3", "web-h4"],
        },
        Case {
            name: "current and update are never pruned",
            current: "web-h1",
            update: "web-h2",
            pods: &[],
            limit: 1,
            want: &["web-h3", "web-h4", "web-h5"],
        },
        Case {
            name: "revisions used by pods are live",
            current: "web-h6",
            update: "web-h6",
            pods: &[Some("web-h1"), Some("h2"), None],
            limit: 1,
            want: &["web-h3", "web-h4"],
        },
        Case {
            name: "negative limit acts as zero",
            current: "web-h6",
            update: "web-h6",
            pods: &[],
            limit: -1,
            want: &["web-h1", "web-h2", "web-h3", "web-h4", "web-h5"],
        },
    ];
    for case in &cases {
        let got: Vec<&str> =
            revisions_to_truncate(&history, case.current, case.update, case.pods, case.limit)
                .iter()
                .map(|r| r.name.as_str())
                .collect();
        assert_eq!(got, case.want, "{}", case.name);
    }
}
