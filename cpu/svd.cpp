// Singular values by Eigen's divide-and-conquer SVD (Jacobi rotations on small blocks), one
// matrix per task.
#include "cpu/svd.h"

#include <tbb/parallel_for.h>

#include <Eigen/SVD>
#include <cmath>
#include <limits>

#include "tensor/convert.h"

namespace loom::cpu {

void run_svdvals(const Group& g) {
  const Node& n = *g.opaque;
  const Input& in = n.in[0];
  const View& v = in.view;
  const int r = int(v.shape.size());
  const int64_t m = v.shape[r - 2], c = v.shape[r - 1], k = std::min(m, c);
  int64_t batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= v.shape[d];
  if (batch * k == 0) return;
  const size_t isz = itemsize(in.dtype), osz = itemsize(n.dtype);
  const char* src = static_cast<const char*>(in.st->data()) + v.offset * int64_t(isz);
  char* dst = static_cast<char*>(g.outputs[0].st->data());
  tbb::parallel_for(int64_t(0), batch, [&](int64_t b) {
    const int64_t off = offset_of(v, 0, r - 2, b);  // the batch index over the leading dims
    // A's transpose, column-major: column i is row i of A (same singular values)
    Eigen::MatrixXd at(c, m);
    for (int64_t i = 0; i < m; ++i)
      load_run<double>(src + (off + i * v.strides[r - 2]) * int64_t(isz), in.dtype,
                       v.strides[r - 1], at.col(i).data(), c);
    const bool finite = at.allFinite();
    Eigen::VectorXd s(k);
    if (finite)
      s = Eigen::BDCSVD<Eigen::MatrixXd>(at).singularValues();  // descending
    else
      s.setConstant(std::numeric_limits<double>::quiet_NaN());
    store_run<double>(dst + b * k * int64_t(osz), n.dtype, 1, s.data(), k);
  });
}

}  // namespace loom::cpu
