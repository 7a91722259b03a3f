! A Fortran program written for the reference BLAS: DGEMM and ZGEMM,
! checked against its own loops (integer-valued data: exact sums).
program gemm
  implicit none
  integer, parameter :: m = 23, n = 19, k = 31
  double precision :: a(m, k), b(k, n), c(m, n), want(m, n)
  complex(kind=8) :: za(k, m), zb(k, n), zc(m, n), zwant(m, n)
  integer :: i, j, bad
  do j = 1, k
    do i = 1, m
      a(i, j) = dble(mod(i * 7 + j, 13) - 6)
      za(j, i) = dcmplx(dble(mod(i + 3 * j, 5) - 2), dble(mod(2 * i + j, 7) - 3))
    end do
  end do
  do j = 1, n
    do i = 1, k
      b(i, j) = dble(mod(i * 5 + 2 * j, 11) - 5)
      zb(i, j) = dcmplx(dble(mod(i + j, 3) - 1), dble(mod(i * j, 5) - 2))
    end do
  end do
  c = 1.0d0
  call dgemm('N', 'N', m, n, k, 1.0d0, a, m, b, k, 3.0d0, c, m)
  want = matmul(a, b) + 3.0d0
  bad = count(c /= want)
  ! C = A^H B with A stored k x m: conjugate transpose.
  zc = (0.0d0, 0.0d0)
  call zgemm('C', 'N', m, n, k, (1.0d0, 0.0d0), za, k, zb, k, (0.0d0, 0.0d0), zc, m)
  zwant = matmul(transpose(conjg(za)), zb)
  bad = bad + count(zc /= zwant)
  if (bad == 0) then
    print '(a)', 'ok'
  else
    print '(a, i0, a)', 'WRONG: ', bad, ' elements'
    stop 1
  end if
end program gemm
