//! Throwaway: two-thread `packed` against two one-thread GEMMs on the two
//! row halves of C, run concurrently.
use fastmm::{gemm, Algorithm, Element, GemmOptions, Matrix};
use std::time::Instant;

fn bench<T: Element>(n: usize, rounds: usize) {
    let mut state = 12345u64;
    let mut rnd = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        T::from_i64((state >> 40) as i64 % 7 - 3)
    };
    let a = Matrix::<T>::from_fn(n, n, |_, _| rnd());
    let b = Matrix::<T>::from_fn(n, n, |_, _| rnd());
    let mut c = Matrix::<T>::zeros(n, n);
    let two = GemmOptions::new(Algorithm::Packed).threads(2);
    let one = GemmOptions::new(Algorithm::Packed).threads(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let run2 = |c: &mut Matrix<T>| {
        let t = Instant::now();
        gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &two).unwrap();
        t.elapsed().as_secs_f64()
    };
    let runs = |c: &mut Matrix<T>| {
        let t = Instant::now();
        let (top, bottom) = c.as_mut().split_at_row(n / 2);
        let at = a.as_ref().submatrix(0, 0, n / 2, n);
        let ab = a.as_ref().submatrix(n / 2, 0, n - n / 2, n);
        pool.join(
            || gemm(T::ONE, at, b.as_ref(), T::ZERO, top, &one).unwrap(),
            || gemm(T::ONE, ab, b.as_ref(), T::ZERO, bottom, &one).unwrap(),
        );
        t.elapsed().as_secs_f64()
    };
    run2(&mut c);
    runs(&mut c);
    let (mut t2, mut ts) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            t2.push(run2(&mut c));
            ts.push(runs(&mut c));
        } else {
            ts.push(runs(&mut c));
            t2.push(run2(&mut c));
        }
    }
    let mut ratios: Vec<f64> = t2.iter().zip(&ts).map(|(x, y)| x / y).collect();
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        v[v.len() / 2]
    };
    let flops = 2.0 * (n as f64).powi(3) / 1e9;
    let (m2, ms) = (med(&mut t2.clone()), med(&mut ts.clone()));
    println!(
        "{} n={n} two-thread packed {:.1} ms ({:.1} GF/s), two slabs {:.1} ms ({:.1} GF/s), two/slabs median ratio {:.3}",
        T::DTYPE,
        m2 * 1e3,
        flops / m2,
        ms * 1e3,
        flops / ms,
        med(&mut ratios)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(2048, |s| s.parse().unwrap());
    let rounds: usize = args.get(2).map_or(9, |s| s.parse().unwrap());
    bench::<f32>(n, rounds);
    bench::<f64>(n, rounds);
}
