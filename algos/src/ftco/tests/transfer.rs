//! Vector sizes on real ranks: the time a vector takes to cross (`LogP::per_mib`, LogGP's G)
//! in FTCO's timeouts and f_ETA, and DATA to peer roots in parts when it outgrows a frame.

use super::*;
use crate::time::Duration;

/// On real ranks a vector of megabytes takes milliseconds to cross. A timeout towards a peer
/// grows by one transfer per vector the peer may move before it answers (one per neighbour,
/// and its own), and f_ETA's per-message overhead by one transfer. Without a size or without
/// G (004's model), nothing changes.
#[test]
fn timeouts_and_eta_grow_by_the_transfers_a_peer_makes_before_it_answers() {
    // Binary tree of 15, one root; rank 7 is a leaf three edges below the root.
    let tree = Tree::new(TreeShape::KAry { k: 2 }, 15, 1).expect("valid tree");
    let mut config = FtcoConfig::new(Rank(7), tree, Collective::Allreduce);
    config.detect_timeout = Duration(100);
    config.payload_bytes = 4 << 20;
    let plain = Ftco::new(config.clone());
    config.costs.per_mib = Duration(10);
    let loaded = Ftco::new(config.clone());
    // 4 MiB at 10 per MiB: one transfer is 40.
    let transfer = 40;
    // The root answers its two children and, at the top of an allreduce, a peer-root slot:
    // three neighbours' vectors and its own. Rank 3 (inner): two children and its parent.
    // Rank 8 (a leaf): its parent and its own.
    for (peer, vectors) in [(0, 4), (3, 4), (8, 2)] {
        assert_eq!(
            loaded.timeout_for_tests(peer).0,
            plain.timeout_for_tests(peer).0 + vectors * transfer,
            "peer {peer}"
        );
    }
    assert_eq!(
        loaded.costs_for_tests().overhead.0,
        plain.costs_for_tests().overhead.0 + transfer
    );
    // A size unknown (0) or G = 0 leaves 004's model as it is.
    config.payload_bytes = 0;
    let unsized_ = Ftco::new(config);
    for peer in [0, 3, 8] {
        assert_eq!(
            unsized_.timeout_for_tests(peer),
            plain.timeout_for_tests(peer)
        );
    }
    assert_eq!(
        unsized_.costs_for_tests().overhead,
        plain.costs_for_tests().overhead
    );
}

/// Every rank may put one vector per DATA frame, so a top rank's DATA to a peer root holding
/// several pieces goes in parts.
fn in_parts(net: &mut Net, n: u32) {
    for rank in &mut net.ranks {
        rank.set_max_data_bytes_for_tests(8 * u64::from(n));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The hardest allreduce property (asymmetric views, notices during the operation) with
    /// DATA in parts: a peer root counts as arrived only at the last part, so no rank fixes
    /// its result on part of a peer's pieces.
    #[test]
    fn allreduce_in_parts_is_consistent_under_asymmetric_views_and_notices(
        (tree, crashes, seed) in scenario(),
        views in any::<u64>(),
        delays in proptest::collection::vec(0u64..400, 1..16),
    ) {
        let n = tree.size();
        let mut net = asymmetric_run(tree, &crashes, seed, views, &delays, true);
        in_parts(&mut net, n);
        net.run(&one_hot(n));
        check_allreduce(&net)?;
    }

    #[test]
    fn allreduce_in_parts_is_exactly_once_and_consistent((tree, crashes, seed) in scenario()) {
        let n = tree.size();
        let mut net = Net::new(tree, Collective::Allreduce, &crashes, seed);
        in_parts(&mut net, n);
        net.run(&one_hot(n));
        check_allreduce(&net)?;
    }
}
