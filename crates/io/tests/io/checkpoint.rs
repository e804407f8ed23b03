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
    // Read by rows (what each rank of a resumed run reads): the rows written, the counts and
    // precision checked.
    let opened = open(&path, true).unwrap();
    assert_eq!(opened.gravity_count::<f32>().unwrap(), 49);
    assert!(
        opened.gravity_count::<f64>().is_err(),
        "the wrong precision"
    );
    for rows in [0..49, 0..1, 10..31, 48..49, 49..49] {
        let r = opened.gravity_rows::<f32>(rows.clone()).unwrap();
        assert_eq!(r.ids(), &p.ids()[rows.clone()]);
        for c in Component::ALL {
            let bits = |s: &[f32]| s.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(r.component(c)), bits(&p.component(c)[rows.clone()]));
        }
    }
    assert!(opened.gravity_rows::<f32>(0..50).is_err());
    assert!(
        opened.meshless_rows::<f32>(0..1).is_err(),
        "not a meshless run's"
    );
    // Flip one bit in the middle: the checksum catches it.
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let e = read_header(&path).unwrap_err();
    assert!(e.message.contains("checksum"), "{e}");
}
