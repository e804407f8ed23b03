use mote_io::schedule::Targets;

#[test]
fn targets_are_reached_once_at_step_boundaries() {
    let mut t = Targets::evenly(1.0, 4, 0.0);
    assert!(!t.due(0.1));
    assert!(t.due(0.26));
    assert!(!t.due(0.3));
    // One long step past two targets reports once and passes both.
    assert!(t.due(0.8));
    assert!(!t.due(0.9));
    assert!(t.due(1.0));
    assert!(!t.due(5.0));
    let mut r = Targets::evenly(1.0, 4, 0.5);
    assert!(!r.due(0.6));
    assert!(r.due(0.75));
    let mut e = Targets::every(Some(0.1), 0.3);
    assert!(!e.due(0.35));
    assert!(e.due(0.4));
    assert!(!Targets::every(None, 0.0).due(1e9));
}
