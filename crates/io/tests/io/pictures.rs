//! Every kind of picture `mote plot` draws is rendered from a real (small) run and checked to be
//! a PNG (or GIF) of the stated size with many colours; the pictures of an unfinished run show
//! what it has written so far.

use std::path::Path;

use mote_io::Source;
use mote_io::meshless::{MeshlessConfig, run_meshless};
use mote_io::plot::{FieldOptions, plot_run};
use mote_io::runner::run_gravity;

/// The size of a PNG and its number of distinct colours.
fn png(path: &Path) -> ((u32, u32), usize) {
    let image = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    let colours: std::collections::HashSet<[u8; 3]> = image.pixels().map(|p| p.0).collect();
    (image.dimensions(), colours.len())
}

/// The size and frame count of a GIF.
fn gif(path: &Path) -> ((u16, u16), usize) {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    let mut decoder = options
        .read_info(std::fs::File::open(path).unwrap())
        .unwrap();
    let size = (decoder.width(), decoder.height());
    let mut frames = 0;
    while decoder.read_next_frame().unwrap().is_some() {
        frames += 1;
    }
    (size, frames)
}

fn meshless(text: &str) -> MeshlessConfig {
    MeshlessConfig::parse(&Source { file: None, text }, &[]).unwrap()
}

fn gravity(text: &str) -> mote_io::GravityConfig {
    mote_io::GravityConfig::parse(&Source { file: None, text }, &[]).unwrap()
}

#[test]
fn every_kind_of_picture_is_drawn() {
    let tmp = tempfile::tempdir().unwrap();
    let movie = FieldOptions {
        snapshot: None,
        movie: true,
    };

    // 1-D: the profiles of density, velocity and pressure against the exact solution.
    let sod = tmp.path().join("sod");
    let c = meshless(
        "physics = \"meshless\"\n[run]\nthreads = 2\n[problem]\nkind = \"sod\"\n\
         resolution = 100\n[output]\nsnapshots = 2\n",
    );
    run_meshless(&c, &sod, false, "test", &mut |_| {}).unwrap();
    let files = plot_run(&sod, &movie).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(names, ["diagnostics.png", "profile.png", "movie.gif"]);
    let (size, colours) = png(&sod.join("profile.png"));
    assert_eq!(size, (1000, 3 * 300 + 50));
    assert!(colours > 20, "{colours}");
    assert_eq!(gif(&sod.join("movie.gif")), ((1000, 950), 3));
    let (size, colours) = png(&sod.join("diagnostics.png"));
    assert_eq!(size, (1000, 800));
    assert!(colours > 20, "{colours}");

    // A scalar equation's profile: its one variable (the snapshot's cell arrays, connectivity,
    // offsets and types, are not fields: they were drawn as three more panels once).
    let burgers = tmp.path().join("burgers");
    let c = meshless(
        "physics = \"meshless\"\n[problem]\nkind = \"burgers_top_hat\"\nresolution = 100\n\
         [output]\nsnapshots = 1\n",
    );
    run_meshless(&c, &burgers, false, "test", &mut |_| {}).unwrap();
    plot_run(&burgers, &FieldOptions::default()).unwrap();
    assert_eq!(png(&burgers.join("profile.png")).0, (1000, 300 + 50));

    // 2-D: colour maps of density, pressure, the error and the order.
    let vortex = tmp.path().join("vortex");
    let c = meshless(
        "physics = \"meshless\"\n[run]\nthreads = 2\nend_time = 0.05\n[problem]\n\
         kind = \"isentropic_vortex\"\nresolution = 16\n[output]\nsnapshots = 1\n",
    );
    run_meshless(&c, &vortex, false, "test", &mut |_| {}).unwrap();
    plot_run(&vortex, &movie).unwrap();
    let (size, colours) = png(&vortex.join("fields.png"));
    assert_eq!(size.0, 1240);
    // The viridis ramps of four maps and their bars.
    assert!(colours > 200, "{colours}");
    assert_eq!(gif(&vortex.join("movie.gif")).1, 2);

    // Gravity: the surface density of a cluster, the orbits of a pair.
    let plummer = tmp.path().join("plummer");
    let c = gravity(
        "physics = \"gravity\"\n[run]\nend_time = 0.25\ndt = 0.0625\n\
         [initial_conditions]\nparticles = 400\n[output]\nsnapshots = 2\n",
    );
    run_gravity(&c, &plummer, false, "test", &mut |_| {}).unwrap();
    plot_run(&plummer, &movie).unwrap();
    let (size, colours) = png(&plummer.join("surface_density.png"));
    assert_eq!(size, (1400, 700));
    assert!(colours > 20, "{colours}");
    assert!(!plummer.join("orbits.png").exists());
    assert_eq!(gif(&plummer.join("movie.gif")).1, 3);
    let kepler = tmp.path().join("kepler");
    let c = gravity(
        "physics = \"gravity\"\n[run]\nend_time = 6.283185307179586\ndt = 0.01\n\
         [initial_conditions]\nkind = \"kepler\"\neccentricity = 0.5\n[output]\nsnapshots = 40\n",
    );
    run_gravity(&c, &kepler, false, "test", &mut |_| {}).unwrap();
    plot_run(&kepler, &FieldOptions::default()).unwrap();
    let (size, colours) = png(&kepler.join("orbits.png"));
    assert_eq!(size, (800, 850));
    assert!(colours > 5, "{colours}");
    assert!(!kepler.join("surface_density.png").exists());

    // A chosen snapshot; one that does not exist is an error naming the count.
    plot_run(
        &sod,
        &FieldOptions {
            snapshot: Some(0),
            movie: false,
        },
    )
    .unwrap();
    let e = plot_run(
        &sod,
        &FieldOptions {
            snapshot: Some(9),
            movie: false,
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("no snapshot 9: the run has 3"),
        "{e}"
    );
    // A listed snapshot that is not the run's (a gravity snapshot in a meshless run): the movie
    // is an error naming the file and the missing field, not a panic.
    std::fs::copy(
        plummer.join("snapshots/snap_00001.vtu"),
        sod.join("snapshots/snap_00002.vtu"),
    )
    .unwrap();
    let e = plot_run(&sod, &movie).unwrap_err();
    assert!(
        e.to_string().contains("snap_00002.vtu") && e.to_string().contains("no field `density`"),
        "{e}"
    );
}

/// A run that is still going (or was killed) has `diagnostics.csv.partial` and the snapshots
/// written so far: `mote plot` draws them, and skips a listed snapshot whose file is missing.
#[test]
fn an_unfinished_run_is_drawn_as_far_as_it_got() {
    let tmp = tempfile::tempdir().unwrap();
    let sod = tmp.path().join("sod");
    let c = meshless(
        "physics = \"meshless\"\n[run]\nthreads = 2\n[problem]\nkind = \"sod\"\n\
         resolution = 100\n[output]\nsnapshots = 2\n",
    );
    run_meshless(&c, &sod, false, "test", &mut |_| {}).unwrap();
    std::fs::rename(
        sod.join("diagnostics.csv"),
        sod.join("diagnostics.csv.partial"),
    )
    .unwrap();
    std::fs::remove_file(sod.join("snapshots/snap_00002.vtu")).unwrap();
    let files = plot_run(
        &sod,
        &FieldOptions {
            snapshot: None,
            movie: true,
        },
    )
    .unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(gif(&sod.join("movie.gif")).1, 2);
    // Without snapshots, the diagnostics alone.
    std::fs::remove_file(sod.join("snapshots.pvd")).unwrap();
    let files = plot_run(&sod, &FieldOptions::default()).unwrap();
    assert_eq!(files.len(), 1);
}
