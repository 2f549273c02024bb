#include "backend/mlx/host/host_kernel.h"

#include <algorithm>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>

#include "common/error.h"

namespace pjrtx::backend {

namespace {

class HostKernel : public mx::Primitive {
 public:
  HostKernel(mx::Stream s, std::string name, HostFn fn)
      : mx::Primitive(s), name_(std::move(name)), fn_(std::move(fn)) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    for (auto& o : outputs) o.set_data(mx::allocator::malloc(o.nbytes()));
    auto& enc = mx::cpu::get_command_encoder(stream());
    for (const auto& i : inputs) enc.set_input_array(i);
    for (auto& o : outputs) enc.set_output_array(o);
    // Copies of the array handles share their storage: the task writes the
    // outputs the graph hands on.
    enc.dispatch([fn = fn_, inputs = inputs, outputs = outputs]() mutable { fn(inputs, outputs); });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    // host_kernel() always places the node on a CPU stream.
    throw std::runtime_error("[" + name_ + "] a host kernel cannot run on a GPU stream");
  }

  const char* name() const override { return name_.c_str(); }

 private:
  std::string name_;
  HostFn fn_;
};

}  // namespace

namespace {

// Evaluated (its flags are set once it is no longer unscheduled) and dense
// in row-major order: read as it is.
bool laid_out(const mx::array& a) {
  return a.status() != mx::array::Status::unscheduled && a.flags().row_contiguous && a.data_size() == a.size();
}

}  // namespace

Arrays host_kernel(std::string name, const Arrays& inputs, std::vector<mx::Shape> shapes,
                   std::vector<mx::Dtype> dtypes, HostFn fn, HostRun how) {
  if (shapes.empty()) {
    // MLX nodes need an output: a side-effect-only kernel yields a bool
    // scalar that the caller keeps (e.g. as a token) so the node runs.
    shapes.push_back({});
    dtypes.push_back(mx::bool_);
  }
  if (how == HostRun::kNowIfReady && std::all_of(inputs.begin(), inputs.end(), [](const mx::array& a) {
        return laid_out(a) && a.is_available();
      })) {
    Arrays outs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      size_t bytes = dtypes[i].size();
      for (int d : shapes[i]) bytes *= static_cast<size_t>(d);
      // A zero-size output still gets an allocation, as transfer.cc's do.
      outs.emplace_back(mx::allocator::malloc(std::max<size_t>(bytes, dtypes[i].size())), shapes[i], dtypes[i]);
    }
    fn(inputs, outs);
    return outs;
  }
  mx::Stream cpu = mx::default_stream(mx::Device::cpu);
  Arrays ins;
  ins.reserve(inputs.size());
  // An input already laid out (a constant, an argument, an earlier run's
  // result) is read as it is: a Contiguous node costs a few microseconds to
  // run even when it copies nothing. MLX orders the read after its producer
  // either way.
  for (const auto& a : inputs) ins.push_back(laid_out(a) ? a : mx::contiguous(a, false, cpu));
  auto prim = std::make_shared<HostKernel>(cpu, std::move(name), std::move(fn));
  return mx::array::make_arrays(std::move(shapes), dtypes, prim, ins);
}

}  // namespace pjrtx::backend
