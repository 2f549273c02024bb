#include "backend/mlx/host/host_kernel.h"

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

Arrays host_kernel(std::string name, const Arrays& inputs, std::vector<mx::Shape> shapes,
                   std::vector<mx::Dtype> dtypes, HostFn fn) {
  mx::Stream cpu = mx::default_stream(mx::Device::cpu);
  Arrays ins;
  ins.reserve(inputs.size());
  // An input already evaluated row-contiguous (a constant, an argument, an
  // earlier run's result) is read as it is: a Contiguous node costs a few
  // microseconds to run even when it copies nothing, and a host loop reads
  // every constant its body captures. Its flags are set once it is no longer
  // unscheduled; MLX orders the read after its producer either way.
  for (const auto& a : inputs) {
    const bool ready_layout = a.status() != mx::array::Status::unscheduled && a.flags().row_contiguous &&
                              a.data_size() == a.size();
    ins.push_back(ready_layout ? a : mx::contiguous(a, false, cpu));
  }
  auto prim = std::make_shared<HostKernel>(cpu, std::move(name), std::move(fn));
  if (shapes.empty()) {
    // MLX nodes need an output: a side-effect-only kernel yields a bool
    // scalar that the caller keeps (e.g. as a token) so the node runs.
    shapes.push_back({});
    dtypes.push_back(mx::bool_);
  }
  return mx::array::make_arrays(std::move(shapes), dtypes, prim, ins);
}

}  // namespace pjrtx::backend
