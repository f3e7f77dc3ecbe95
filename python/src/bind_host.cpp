// run_host: one thread per rank of the host backend, every rank's shard a NumPy array, through the executor.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "args.hpp"
#include "bindings.hpp"
#include "redistributor.hpp"
#include "reshard/host_backend.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

std::string shape_text(const Dims& d) { return to_list_string(d); }

py::list run_host(const PlanArgs& args, const py::list& shards) {
  PlanRequest req = make_plan_request(args);
  const Layout& src = req.src;
  const Layout& dst = req.dst;
  const int n = src.mesh().world_size();  // between meshes: every rank of the world (empty shards outside a mesh)
  RESHARD_REQUIRE(static_cast<int>(shards.size()) == n, "mesh ", src.mesh().str(),
                  n == src.mesh().size() ? " has " : " is in a world of ", n, " ranks but ", shards.size(),
                  " shards were given (one per rank, in rank order)");
  const size_t es = static_cast<size_t>(element_size(req.dtype));

  std::vector<py::array> inputs, outputs;
  std::vector<const void*> in_ptrs(n);
  std::vector<void*> out_ptrs(n);
  for (int r = 0; r < n; ++r) {
    RESHARD_REQUIRE(py::isinstance<py::array>(shards[r]), "shard of rank ", r, " is not a NumPy array");
    py::array a = py::reinterpret_borrow<py::array>(shards[r]);
    RESHARD_REQUIRE(a.flags() & py::array::c_style, "shard of rank ", r, " is not C-contiguous");
    RESHARD_REQUIRE(static_cast<size_t>(a.itemsize()) == es, "shard of rank ", r, " has ", a.itemsize(),
                    "-byte elements; dtype ", to_string(req.dtype), " has ", es);
    const Box box = src.box(r);
    Dims got(static_cast<int>(a.ndim()));
    for (int d = 0; d < got.size(); ++d) got[d] = a.shape(d);
    RESHARD_REQUIRE(got == box.shape, "shard of rank ", r, " has shape ", shape_text(got), "; layout ", src.str(),
                    " gives rank ", r, " shape ", shape_text(box.shape));
    const Box out_box = dst.box(r);
    std::vector<py::ssize_t> out_shape(out_box.shape.begin(), out_box.shape.end());
    py::array out(a.dtype(), out_shape);
    in_ptrs[r] = a.data();
    out_ptrs[r] = out.mutable_data();
    inputs.push_back(std::move(a));
    outputs.push_back(std::move(out));
  }

  {
    py::gil_scoped_release release;
    const Plan plan = make_plan(src, dst, req.dtype, req.options);
    HostWorld world(n);
    run_ranks(
        n,
        [&](int r) {
          HostCommunicator comm(world, r);
          HostDevice device;
          Redistributor redistributor(plan, comm, device);
          redistributor.run(in_ptrs[r], out_ptrs[r], nullptr);
          redistributor.wait(nullptr);
        },
        &world);
  }
  py::list result;
  for (py::array& o : outputs) result.append(std::move(o));
  return result;
}

}  // namespace

void bind_host(py::module_& m) {
  m.def("run_host", &run_host, py::arg("args"), py::arg("shards"),
        "Runs a redistribution on the host backend (one thread per rank): source shards in, target shards out.");
}

}  // namespace reshard::python
