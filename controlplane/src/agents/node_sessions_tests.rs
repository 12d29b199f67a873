use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;

#[tokio::test(start_paused = true)]
async fn sessions_stop_the_moment_leadership_is_lost_even_mid_supervision() {
    let sessions: Arc<Mutex<Vec<CancellationToken>>> = Arc::default();
    let (leading, leadership) = watch::channel(false);
    let shutdown = CancellationToken::new();
    let started = sessions.clone();
    let runner = tokio::spawn(while_leading(leadership, shutdown.clone(), move |term| {
        let started = started.clone();
        async move {
            started.lock().expect("lock").push(term.child_token());
            // A supervision round waiting on an apiserver that does not answer.
            std::future::pending::<()>().await;
        }
    }));
    tokio::task::yield_now().await;
    assert!(
        sessions.lock().expect("lock").is_empty(),
        "a standby started sessions"
    );

    leading.send_replace(true);
    while sessions.lock().expect("lock").is_empty() {
        tokio::task::yield_now().await;
    }
    let first = sessions.lock().expect("lock")[0].clone();
    assert!(!first.is_cancelled());

    leading.send_replace(false);
    // No time passes: only the tasks already woken get to run.
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    assert!(first.is_cancelled(), "the session outlived the lost lease");

    // A new term gets new sessions, and shutdown ends them too.
    leading.send_replace(true);
    while sessions.lock().expect("lock").len() < 2 {
        tokio::task::yield_now().await;
    }
    let second = sessions.lock().expect("lock")[1].clone();
    assert!(!second.is_cancelled());
    shutdown.cancel();
    runner.await.expect("the session loop ends on shutdown");
    assert!(second.is_cancelled());
}

/// A node object for the tests: its node's name and a generation.
#[derive(Debug, PartialEq)]
struct Object {
    generation: i64,
    label: &'static str,
}

fn wanted(objects: &[(&str, i64, &'static str)]) -> HashMap<String, Arc<Object>> {
    objects
        .iter()
        .map(|&(node, generation, label)| (node.to_owned(), Arc::new(Object { generation, label })))
        .collect()
}

type Started = Vec<(String, watch::Receiver<Arc<Object>>, CancellationToken)>;

fn keep(
    sessions: &mut NodeSessions<Object>,
    term: &CancellationToken,
    objects: &[(&str, i64, &'static str)],
) -> Started {
    let mut started = Started::new();
    sessions.keep(
        wanted(objects),
        term,
        |current, latest| current.generation != latest.generation,
        |node, receiver, stop| started.push((node, receiver, stop)),
    );
    started
}

fn names(started: &Started) -> BTreeSet<&str> {
    started.iter().map(|(node, ..)| node.as_str()).collect()
}

#[test]
fn a_session_per_wanted_node_started_once_stopped_when_unwanted_and_woken_when_moved() {
    let term = CancellationToken::new();
    let mut sessions = NodeSessions::default();

    let mut first = keep(&mut sessions, &term, &[("a", 1, "x"), ("b", 1, "x")]);
    assert_eq!(names(&first), BTreeSet::from(["a", "b"]));
    first.sort_by(|x, y| x.0.cmp(&y.0));
    let [(_, mut a_latest, a_stop), (_, mut b_latest, b_stop)] =
        <[_; 2]>::try_from(first).expect("two sessions");
    a_latest.mark_unchanged();
    b_latest.mark_unchanged();

    // a changes in a way that does not matter, b moves, c is new: only c starts.
    let second = keep(
        &mut sessions,
        &term,
        &[("a", 1, "y"), ("b", 2, "x"), ("c", 1, "x")],
    );
    assert_eq!(names(&second), BTreeSet::from(["c"]));
    assert!(
        !a_latest.has_changed().expect("a runs"),
        "a was woken for nothing"
    );
    assert_eq!(
        a_latest.borrow().label,
        "y",
        "a does not hold the latest version"
    );
    assert!(b_latest.has_changed().expect("b runs"), "b was not woken");
    assert_eq!(b_latest.borrow().generation, 2);

    // a is no longer wanted: its session stops; b ended on its own: it starts again.
    b_stop.cancel();
    let third = keep(&mut sessions, &term, &[("b", 2, "x"), ("c", 1, "x")]);
    assert!(
        a_stop.is_cancelled(),
        "an unwanted node's session kept running"
    );
    assert_eq!(names(&third), BTreeSet::from(["b"]));
    assert_eq!(sessions.nodes(), BTreeSet::from(["b", "c"]));

    // Sessions are children of the term.
    term.cancel();
    assert!(third.iter().all(|(_, _, stop)| stop.is_cancelled()));
}

#[tokio::test(start_paused = true)]
async fn reconnects_wait_one_second_doubling_to_a_minute_and_end_when_stopped() {
    let mut reconnect = Reconnect::default();
    let stop = CancellationToken::new();
    let mut waits = Vec::new();
    for _ in 0..8 {
        waits.push(reconnect.upcoming().as_secs());
        let before = Instant::now();
        assert!(reconnect.wait(&stop).await);
        // The paused clock jumps to the timer, rounded up to the timer's millisecond.
        let waited = Instant::now() - before;
        let asked = Duration::from_secs(waits[waits.len() - 1]);
        assert!(
            waited >= asked && waited <= asked + Duration::from_millis(2),
            "{waited:?}"
        );
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);

    stop.cancel();
    assert!(!reconnect.wait(&stop).await, "a stopped session waited");
}

#[tokio::test(start_paused = true)]
async fn a_connection_that_served_for_a_while_starts_the_backoff_again() {
    let mut reconnect = Reconnect::default();
    let stop = CancellationToken::new();
    for _ in 0..4 {
        assert!(reconnect.wait(&stop).await);
    }
    assert_eq!(
        reconnect.upcoming(),
        Duration::from_secs(16),
        "quick failures double"
    );
    // The next attempt connects and serves for half a minute before it breaks.
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(reconnect.upcoming(), Duration::from_secs(1));
    assert!(reconnect.wait(&stop).await);
    assert_eq!(
        reconnect.upcoming(),
        Duration::from_secs(2),
        "and doubles from there"
    );
}
