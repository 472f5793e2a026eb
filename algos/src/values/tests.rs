use super::*;

/// Every operator a numeric vector may name (each applies to some types).
const NUMERIC_OPS: [ReduceOp; 8] = [
    ReduceOp::Sum,
    ReduceOp::Average,
    ReduceOp::Prod,
    ReduceOp::Min,
    ReduceOp::Max,
    ReduceOp::BitAnd,
    ReduceOp::BitOr,
    ReduceOp::BitXor,
];

#[test]
fn float_ops() {
    let mut v = Values::F64(vec![1.0, 5.0]);
    v.combine(ReduceOp::Sum, ValuesRef::F64(&[2.0, -1.0]))
        .unwrap();
    assert_eq!(v, Values::F64(vec![3.0, 4.0]));
    v.combine(ReduceOp::Min, ValuesRef::F64(&[0.5, 9.0]))
        .unwrap();
    assert_eq!(v, Values::F64(vec![0.5, 4.0]));
    v.combine(ReduceOp::Max, ValuesRef::F64(&[1.5, 9.0]))
        .unwrap();
    assert_eq!(v, Values::F64(vec![1.5, 9.0]));
    assert!(matches!(
        v.combine(ReduceOp::BitAnd, ValuesRef::F64(&[1.0, 1.0])),
        Err(ValuesError::OpNotDefined { .. })
    ));
}

#[test]
fn word_ops_and_mismatches() {
    let mut w = Values::U64(vec![0b1100]);
    w.combine(ReduceOp::BitAnd, ValuesRef::U64(&[0b1010]))
        .unwrap();
    assert_eq!(w, Values::U64(vec![0b1000]));
    w.combine(ReduceOp::BitOr, ValuesRef::U64(&[0b0001]))
        .unwrap();
    assert_eq!(w, Values::U64(vec![0b1001]));
    assert!(matches!(
        w.combine(ReduceOp::Sum, ValuesRef::U64(&[1, 2])),
        Err(ValuesError::LengthMismatch { .. })
    ));
    assert!(matches!(
        w.combine(ReduceOp::Sum, ValuesRef::F64(&[1.0])),
        Err(ValuesError::DtypeMismatch { .. })
    ));
}

#[test]
fn rank_union_merges_sorted_sets() {
    let mut s = Values::RankIds(vec![1, 4, 9]);
    s.combine(ReduceOp::RankUnion, ValuesRef::RankIds(&[0, 4, 5, 10]))
        .unwrap();
    assert_eq!(s, Values::RankIds(vec![0, 1, 4, 5, 9, 10]));
    assert_eq!(
        s.combine(ReduceOp::RankUnion, ValuesRef::RankIds(&[3, 2])),
        Err(ValuesError::UnsortedRankIds)
    );
}

#[test]
fn average_divides_by_weight() {
    let mut v = Values::F64(vec![3.0, 6.0, 1.0]);
    v.combine(ReduceOp::Average, ValuesRef::F64(&[5.0, 2.0, 1.0]))
        .unwrap();
    let mut est = Vec::new();
    if let Values::F64(raw) = &v {
        finish_estimate(ReduceOp::Average, raw, &mut est);
    }
    assert_eq!(est, vec![4.0, 4.0]);
}

#[test]
fn integer_types_reduce_with_every_integer_operator() {
    let mut v = Values::I32(vec![3, -4]);
    v.combine(ReduceOp::Prod, ValuesRef::I32(&[2, 5])).unwrap();
    assert_eq!(v, Values::I32(vec![6, -20]));
    v.combine(ReduceOp::BitXor, ValuesRef::I32(&[6, 0]))
        .unwrap();
    assert_eq!(v, Values::I32(vec![0, -20]));
    let mut w = Values::U32(vec![u32::MAX, 7]);
    w.combine(ReduceOp::Sum, ValuesRef::U32(&[1, 1])).unwrap();
    assert_eq!(w, Values::U32(vec![0, 8]), "integer sums wrap");
    let mut l = Values::I64(vec![i64::MIN, 1]);
    l.combine(ReduceOp::Min, ValuesRef::I64(&[0, -1])).unwrap();
    assert_eq!(l, Values::I64(vec![i64::MIN, -1]));
    assert!(matches!(
        l.combine(ReduceOp::Average, ValuesRef::I64(&[0, 0])),
        Err(ValuesError::OpNotDefined { .. })
    ));
    assert!(matches!(
        l.combine(ReduceOp::Sum, ValuesRef::U64(&[0, 0])),
        Err(ValuesError::DtypeMismatch { .. })
    ));
}

#[test]
fn operators_apply_where_combine_accepts_them() {
    for dtype in Dtype::NUMERIC {
        for op in NUMERIC_OPS {
            let mut acc = dtype.zeros(3);
            let other = dtype.zeros(3);
            let accepted = acc.combine(op, other.as_ref()).is_ok();
            assert_eq!(accepted, op.applies_to(dtype), "{op:?} on {dtype:?}");
            assert_eq!(ReduceOp::parse(op.name()), Ok(op));
        }
        assert_eq!(Dtype::from_u8(dtype as u8), Some(dtype));
    }
}

#[test]
fn slices_writes_and_flips_stay_in_bounds() {
    let v = Values::U32(vec![1, 2, 3, 4]);
    let middle = v.as_ref().slice(1..3).unwrap();
    assert_eq!(middle, ValuesRef::U32(&[2, 3]));
    assert!(v.as_ref().slice(3..5).is_none());
    let mut w = Values::U32(vec![0; 4]);
    w.write_at(2, middle).unwrap();
    assert_eq!(w, Values::U32(vec![0, 0, 2, 3]));
    assert!(w.write_at(3, middle).is_err());
    assert!(w.write_at(0, ValuesRef::I32(&[1])).is_err());
    assert!(w.flip_bit(0, 31));
    assert_eq!(w, Values::U32(vec![1 << 31, 0, 2, 3]));
    assert!(!w.flip_bit(0, 32));
    assert!(!w.flip_bit(4, 0));
}

#[test]
fn digests_tell_type_length_and_every_bit_apart() {
    let base = Values::I32((0..33).collect());
    let d = digest(base.as_ref());
    assert_eq!(d, digest(base.clone().as_ref()));
    for elem in 0..33 {
        for bit in [0, 17, 31] {
            let mut flipped = base.clone();
            assert!(flipped.flip_bit(elem, bit));
            assert_ne!(digest(flipped.as_ref()), d, "elem {elem} bit {bit}");
        }
    }
    let same_bytes = Values::U32((0..33).collect());
    assert_ne!(
        digest(same_bytes.as_ref()),
        d,
        "the type is part of the digest"
    );
    let shorter = Values::I32((0..32).collect());
    assert_ne!(digest(shorter.as_ref()), d);
}

/// `combine_into(out, acc, other)` against copying `acc` into `out` and combining `other` in,
/// for one element type, every operator it takes, on drawn values (NaNs and infinities
/// included for floats: compared bit for bit).
fn combine_into_matches_copy_then_combine<T: Element>(acc: &[T], other: &[T]) {
    for op in NUMERIC_OPS {
        let mut expected = acc.to_vec();
        let mut out = vec![T::zeroed(); acc.len()];
        let twice = T::combine(&mut expected, other, op);
        let once = T::combine_into(&mut out, acc, other, op);
        assert_eq!(once.is_ok(), twice.is_ok(), "{op:?} on {:?}", T::DTYPE);
        if once.is_ok() {
            let bits = |v: &[T]| bytemuck::cast_slice::<T, u8>(v).to_vec();
            assert_eq!(bits(&out), bits(&expected), "{op:?} on {:?}", T::DTYPE);
        }
    }
    let mut short = vec![T::zeroed(); acc.len() + 1];
    assert!(T::combine_into(&mut short, acc, other, ReduceOp::Sum).is_err());
}

proptest::proptest! {
    #[test]
    fn combine_into_is_copy_then_combine_in_one_pass(
        words in proptest::collection::vec(proptest::prelude::any::<(u64, u64)>(), 0..40)
    ) {
        let (a, b): (Vec<u64>, Vec<u64>) = words.into_iter().unzip();
        combine_into_matches_copy_then_combine::<u64>(&a, &b);
        let as_i64 = |v: &[u64]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        combine_into_matches_copy_then_combine::<i64>(&as_i64(&a), &as_i64(&b));
        let as_u32 = |v: &[u64]| v.iter().map(|&x| x as u32).collect::<Vec<_>>();
        combine_into_matches_copy_then_combine::<u32>(&as_u32(&a), &as_u32(&b));
        let as_i32 = |v: &[u64]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
        combine_into_matches_copy_then_combine::<i32>(&as_i32(&a), &as_i32(&b));
        let as_f64 = |v: &[u64]| v.iter().map(|&x| f64::from_bits(x)).collect::<Vec<_>>();
        combine_into_matches_copy_then_combine::<f64>(&as_f64(&a), &as_f64(&b));
        let as_f32 = |v: &[u64]| v.iter().map(|&x| f32::from_bits(x as u32)).collect::<Vec<_>>();
        combine_into_matches_copy_then_combine::<f32>(&as_f32(&a), &as_f32(&b));
    }
}
