use std::collections::BTreeSet;

use super::{fresh_instance_id, random_u64};

#[test]
fn fresh_instance_ids_are_short_safe_and_unused() {
    let mut taken: BTreeSet<String> = ["bcdfg", "hjklm"].map(str::to_owned).into();
    for _ in 0..200 {
        let id = fresh_instance_id(&taken, &mut random_u64);
        assert_eq!(id.len(), 5, "{id}");
        assert!(
            id.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
            "{id}"
        );
        assert!(!taken.contains(&id), "{id} was taken");
        taken.insert(id);
    }
}

#[test]
fn fresh_instance_ids_follow_the_randomness_given() {
    let draws = |values: Vec<u64>| {
        let mut values = values.into_iter();
        move || values.next().expect("no more draws")
    };
    let none = BTreeSet::new();
    assert_eq!(fresh_instance_id(&none, &mut draws(vec![0])), "bbbbb");
    // Base 27, least significant digit first.
    assert_eq!(
        fresh_instance_id(&none, &mut draws(vec![1 + 2 * 27])),
        "cdbbb"
    );
    let same = |seed| fresh_instance_id(&none, &mut draws(vec![seed]));
    assert_eq!(same(123_456_789), same(123_456_789));
    // A taken id draws again.
    let taken: BTreeSet<String> = ["bbbbb".to_owned()].into();
    assert_eq!(
        fresh_instance_id(&taken, &mut draws(vec![0, 0, 1])),
        "cbbbb"
    );
}
