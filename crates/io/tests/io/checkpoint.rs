use mote_core::{Component, Precision};
use mote_io::checkpoint::*;

fn header() -> Header {
    Header {
        mote_version: "0".into(),
        step: 7,
        time: 0.5,
        precision: Precision::F32,
        config: "physics = \"gravity\"\n".into(),
        initial_energy: -0.25,
        snapshots: vec![(0.0, "snap_00000.vtu".into())],
    }
}

#[test]
fn round_trip_is_bitwise_and_corruption_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("c.mote");
    let mut p = mote_gravity::initial_conditions::plummer::<f32>(50, 2).unwrap();
    p.swap_remove(3);
    write(
        &path,
        &header(),
        &p,
        &mote_core::comm::RootStream::one(p.len()),
    )
    .unwrap();
    let (h, arrays) = read_header(&path).unwrap();
    assert_eq!(h, header());
    let q = read_particles::<f32>(&path, &arrays).unwrap();
    for c in Component::ALL {
        let bits = |s: &[f32]| s.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(q.component(c)), bits(p.component(c)));
    }
    assert_eq!(q.ids(), p.ids());
    // Flip one bit in the middle: the checksum catches it.
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let e = read_header(&path).unwrap_err();
    assert!(e.message.contains("checksum"), "{e}");
}
