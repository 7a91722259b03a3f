//! `fastmm multiply` on the files numpy users have: text as `np.savetxt`
//! writes it, stdin and stdout, 1-D operands with numpy's `matmul`
//! shapes, and NaN/∞ under `--check`. Where python3 with numpy is present
//! (the test script installs it; `FASTMM_REQUIRE_NUMPY=1` makes its
//! absence a failure), numpy itself writes the inputs and reads C back.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fastmm(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the fastmm binary runs");
    let mut input = child.stdin.take().expect("piped stdin");
    // A run that fails before reading stdin closes it: not this test's
    // concern, the exit status and stderr are.
    let _ = input.write_all(stdin.unwrap_or_default());
    drop(input);
    child.wait_with_output().expect("fastmm exits")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastmm-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a Python program with numpy in `dir`; `None` when numpy is not
/// installed (and not required).
fn numpy(dir: &Path, program: &str) -> Option<String> {
    let out = Command::new("python3")
        .current_dir(dir)
        .args(["-c", &format!("import numpy as np\n{program}")])
        .output();
    match out {
        Ok(out) if out.status.success() => Some(text(&out.stdout)),
        Ok(out) if !text(&out.stderr).contains("No module named 'numpy'") => {
            panic!("python failed: {}", text(&out.stderr))
        }
        _ => {
            assert!(
                std::env::var_os(fastmm::config::REQUIRE_NUMPY_ENV).is_none(),
                "FASTMM_REQUIRE_NUMPY is set but python3 cannot import numpy"
            );
            eprintln!("note: numpy is not installed; its round trips are skipped");
            None
        }
    }
}

#[test]
fn multiply_reads_and_writes_numpy_text() {
    let dir = scratch("text");
    // As np.savetxt writes them: the default (space-separated, %.18e), a
    // header, a comma delimiter with a trailing comma, a BOM and CRLF.
    std::fs::write(
        dir.join("a.csv"),
        "# A, 2x3\n1.000000000000000000e+00 2.000000000000000000e+00 3.000000000000000000e+00\n-1.000000000000000000e+00 5.000000000000000000e-01 0.000000000000000000e+00\n",
    )
    .unwrap();
    std::fs::write(dir.join("b.csv"), "\u{feff}1,0,\r\n0,2,\r\n\r\n1,1,\r\n").unwrap();
    let out = fastmm(&dir, &["multiply", "a.csv", "b.csv", "-o", "c.csv"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Floats in their shortest round-trip form, as numpy prints them.
    assert_eq!(
        std::fs::read_to_string(dir.join("c.csv")).unwrap(),
        "4.0,7.0\n-1.0,1.0\n"
    );
    // Whitespace-separated .txt, and a named delimiter for every text
    // input (with a format for a name whose extension says none).
    std::fs::write(dir.join("semi.data"), "1;2;3\n4;5;6\n").unwrap();
    std::fs::write(dir.join("semi.csv"), "1;0;\n0;2\n1;1\n").unwrap();
    let out = fastmm(
        &dir,
        &[
            "multiply",
            "semi.data",
            "semi.csv",
            "-o",
            "c.txt",
            "--format",
            "csv",
            "--delimiter",
            ";",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("c.txt")).unwrap(),
        "4.0 7.0\n10.0 16.0\n"
    );

    let Some(_) = numpy(
        &dir,
        "rng = np.random.default_rng(5)\n\
         a = rng.standard_normal((23, 17)) * 1e20\n\
         b = rng.standard_normal((17, 9)) * 1e-20\n\
         np.savetxt('na.csv', a)\n\
         np.savetxt('nb.csv', b, delimiter=',', header='b')\n\
         np.save('expected.npy', a @ b)",
    ) else {
        return;
    };
    let out = fastmm(
        &dir,
        &["multiply", "na.csv", "nb.csv", "-o", "nc.csv", "--check"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let diff = numpy(
        &dir,
        "c = np.loadtxt('nc.csv', delimiter=',')\n\
         e = np.load('expected.npy')\n\
         print(np.abs(c - e).max() / np.abs(e).max())",
    )
    .unwrap();
    let diff: f64 = diff.trim().parse().unwrap();
    assert!(diff < 1e-13, "numpy reads back C off by {diff}");
}

#[test]
fn dash_is_stdin_and_stdout_with_a_named_format() {
    let dir = scratch("stdio");
    std::fs::write(dir.join("b.csv"), "1,2\n3,4\n").unwrap();
    let out = fastmm(
        &dir,
        &[
            "multiply",
            "-",
            "b.csv",
            "-o",
            "-",
            "--format",
            "txt",
            "--output-format",
            "csv",
        ],
        Some(b"1 1\n0 1\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // C alone on stdout; the report on stderr.
    assert_eq!(text(&out.stdout), "4.0,6.0\n3.0,4.0\n");
    assert!(
        text(&out.stderr).contains("wrote stdout"),
        "{}",
        text(&out.stderr)
    );
    for (args, says) in [
        (
            &["multiply", "-", "b.csv", "-o", "c.csv"][..],
            "name it with --format",
        ),
        (
            &["multiply", "b.csv", "b.csv", "-o", "-"][..],
            "name it with --output-format",
        ),
        (
            &["multiply", "-", "-", "-o", "c.csv", "--format", "csv"][..],
            "cannot both be read from stdin",
        ),
    ] {
        let out = fastmm(&dir, args, Some(b"1\n"));
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }
}

#[test]
fn vectors_follow_numpy_matmul_shapes() {
    let dir = scratch("vectors");
    let Some(_) = numpy(
        &dir,
        "rng = np.random.default_rng(7)\n\
         np.save('m.npy', rng.standard_normal((6, 4)))\n\
         np.save('k.npy', rng.standard_normal(4))\n\
         np.save('r.npy', rng.standard_normal(6))\n\
         np.save('s.npy', np.float64(2.0))",
    ) else {
        return;
    };
    for (a, b, c) in [
        ("m.npy", "k.npy", "mk.npy"),
        ("r.npy", "m.npy", "rm.npy"),
        ("k.npy", "k.npy", "kk.npy"),
    ] {
        let out = fastmm(&dir, &["multiply", a, b, "-o", c, "--check"], None);
        assert!(out.status.success(), "{a} {b}: {}", text(&out.stderr));
    }
    let report = numpy(
        &dir,
        "for a, b, c in [('m', 'k', 'mk'), ('r', 'm', 'rm'), ('k', 'k', 'kk')]:\n    \
             want = np.load(a + '.npy') @ np.load(b + '.npy')\n    \
             got = np.load(c + '.npy')\n    \
             print(c, got.shape == want.shape, float(np.abs(got - want).max()))",
    )
    .unwrap();
    for line in report.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[1], "True", "shape differs from numpy's: {line}");
        assert!(fields[2].parse::<f64>().unwrap() < 1e-12, "{line}");
    }
    let out = fastmm(&dir, &["multiply", "s.npy", "m.npy", "-o", "x.npy"], None);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is a scalar (a 0-D array)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn nan_and_infinity_pass_through_every_format_and_the_check() {
    let dir = scratch("nan");
    // numpy's spelling of the special values, in a CSV.
    std::fs::write(dir.join("a.csv"), "nan,1\ninf,0\n-inf,2\n").unwrap();
    std::fs::write(dir.join("b.csv"), "1,0\n1,1\n").unwrap();
    for algo in ["naive", "packed", "strassen", "winograd"] {
        let out = fastmm(
            &dir,
            &[
                "multiply",
                "a.csv",
                "b.csv",
                "-o",
                "c.csv",
                "--check",
                "-a",
                algo,
                "--threshold",
                "2",
            ],
            None,
        );
        assert!(out.status.success(), "{algo}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("check: full ok"), "{algo}");
        // inf·1 + 0·1 = inf and inf·0 + 0·1 = NaN (IEEE), as numpy.
        assert_eq!(
            std::fs::read_to_string(dir.join("c.csv")).unwrap(),
            "nan,nan\ninf,nan\n-inf,nan\n",
            "{algo}"
        );
        for ext in ["npy", "mtx", "txt", "bin"] {
            let out = fastmm(
                &dir,
                &["multiply", "a.csv", "b.csv", "-o", &format!("c.{ext}")],
                None,
            );
            assert!(out.status.success(), "{ext}: {}", text(&out.stderr));
        }
    }
    let out = fastmm(
        &dir,
        &["multiply", "c.npy", "b.csv", "-o", "d.csv", "--check"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = fastmm(
        &dir,
        &[
            "multiply",
            "c.mtx",
            "b.csv",
            "-o",
            "e.csv",
            "--check",
            "-a",
            "strassen",
            // A threshold that gives it a level: without one it is its
            // base product already, and says nothing.
            "--threshold",
            "2",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("strassen runs its classical base"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("d.csv")).unwrap(),
        std::fs::read_to_string(dir.join("e.csv")).unwrap()
    );
}

#[test]
fn complex_files_multiply_as_numpy_writes_and_reads_them() {
    let dir = scratch("complex");
    // Gaussian integers: every real product of the parts is exact, so
    // both complex forms give numpy's digits exactly.
    std::fs::write(
        dir.join("a.txt"),
        " (1.000000000000000000e+00+2.000000000000000000e+00j) (3.000000000000000000e+00+-1.000000000000000000e+00j)\n(0+1j) -2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.mtx"),
        "%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 2 0\n2 1 1 -1\n",
    )
    .unwrap();
    // A = [[1+2i, 3−i], [i, −2]], B = [[2, 1+i], [1−i, 0]] (Hermitian).
    let expected = "(4.0+0.0j) (-1.0+3.0j)\n(-2.0+4.0j) (-1.0+1.0j)\n";
    for accuracy in ["native", "bound"] {
        let out = fastmm(
            &dir,
            &[
                "multiply",
                "a.txt",
                "b.mtx",
                "-o",
                "c.txt",
                "--check",
                "--accuracy",
                accuracy,
            ],
            None,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report = text(&out.stdout);
        assert!(report.contains("c128"), "{report}");
        let form = if accuracy == "native" { "4m" } else { "3m" };
        assert!(
            report.contains(&format!("ok ({form} complex form)")),
            "{report}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("c.txt")).unwrap(),
            expected
        );
    }
    // A real operand becomes complex; c64 is asked for; .npy and .mtx out.
    std::fs::write(dir.join("r.csv"), "1,0\n0,1\n").unwrap();
    let out = fastmm(
        &dir,
        &["multiply", "a.txt", "r.csv", "-o", "c.npy", "-d", "c64"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("c64"), "{}", text(&out.stdout));
    let out = fastmm(&dir, &["multiply", "c.npy", "b.mtx", "-o", "c.mtx"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mtx = std::fs::read_to_string(dir.join("c.mtx")).unwrap();
    assert!(
        mtx.starts_with("%%MatrixMarket matrix array complex general\n"),
        "{mtx}"
    );
    // Column by column: C[0][0], C[1][0], ...
    assert!(
        mtx.ends_with("2 2\n4.0 0.0\n-2.0 4.0\n-1.0 3.0\n-1.0 1.0\n"),
        "{mtx}"
    );
    // What cannot be: a raw output, out of core, a real type asked of
    // complex values.
    for (args, says) in [
        (vec!["-o", "c.bin"], "a raw file holds a real matrix"),
        (
            vec!["-o", "d.npy", "--out-of-core"],
            "--out-of-core multiplies real matrices",
        ),
        (
            vec!["-o", "d.npy", "-d", "f64"],
            "holds complex values; multiply them as c64 or c128",
        ),
    ] {
        let mut all = vec!["multiply", "c.npy", "b.mtx"];
        all.extend(args);
        let out = fastmm(&dir, &all, None);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }

    let Some(_) = numpy(
        &dir,
        "rng = np.random.default_rng(8)\n\
         a = rng.standard_normal((31, 40)) + 1j * rng.standard_normal((31, 40))\n\
         b = (rng.standard_normal((40, 7)) + 1j * rng.standard_normal((40, 7))).astype(np.complex64)\n\
         np.save('za.npy', np.asfortranarray(a))\n\
         np.savetxt('zb.txt', b)\n\
         np.save('expected.npy', a @ b.astype(np.complex128))",
    ) else {
        return;
    };
    // complex128 (Fortran order) by complex64 text: c128, as numpy.
    let out = fastmm(
        &dir,
        &["multiply", "za.npy", "zb.txt", "-o", "zc.npy", "--check"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let diff = numpy(
        &dir,
        "c = np.load('zc.npy')\n\
         e = np.load('expected.npy')\n\
         assert c.dtype == np.complex128, c.dtype\n\
         print(np.abs(c - e).max() / np.abs(e).max())",
    )
    .unwrap();
    let diff: f64 = diff.trim().parse().unwrap();
    assert!(diff < 1e-13, "numpy reads back C off by {diff}");
}
