// run_host: one thread per rank of the host backend, every rank's shard a NumPy array, through the executor.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "args.hpp"
#include "bindings.hpp"
#include "redistributor.hpp"
#include "reshard/host_backend.hpp"

namespace py = pybind11;

namespace reshard::python {

// The NumPy dtype of a converted target's arrays: floats as floats, bf16 and fp8 as their bits (unsigned integers).
py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::kF64:
      return py::dtype("float64");
    case DType::kF32:
      return py::dtype("float32");
    case DType::kF16:
      return py::dtype("float16");
    case DType::kBF16:
      return py::dtype("uint16");
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return py::dtype("uint8");
    default:  // validate_conversion admits floating targets only
      fail(ErrorKind::kInternal, cat("no NumPy dtype for a converted target of ", to_string(d)));
  }
}

// Whether NumPy arrays of kind `kind` hold dtype `d`'s values (sizes are checked apart): floating types as floats,
// integers as integers of their signedness, bool as bool, complex64 as complex, and bf16 and fp8 as their bits
// (unsigned integers, or an extension type such as ml_dtypes', kind 'V'). Anything else (object arrays, floats declared
// as integers) would hand the executor values it reads as something they are not.
bool numpy_holds(char kind, DType d) {
  switch (d) {
    case DType::kF64:
    case DType::kF32:
    case DType::kF16:
      return kind == 'f';
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return kind == 'u' || kind == 'V';
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
      return kind == 'i';
    case DType::kU8:
      return kind == 'u';
    case DType::kBool:
      return kind == 'b';
    case DType::kC64:
      return kind == 'c';
  }
  return false;
}

namespace {

std::string shape_text(const Dims& d) { return to_list_string(d); }

// Every rank's source shard checked against the layout (NumPy, C order, element size, shape), with the target arrays
// allocated: what run_host and run_host_batch hand the executor.
struct RankArrays {
  std::vector<py::array> inputs, outputs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
};

RankArrays take_shards(const PlanRequest& req, const py::list& shards, const std::string& which) {
  const Layout& src = req.src;
  const Layout& dst = req.dst;
  const int n = src.mesh().world_size();  // between meshes: every rank of the world (empty shards outside a mesh)
  RESHARD_REQUIRE(static_cast<int>(shards.size()) == n, which, "mesh ", src.mesh().str(),
                  n == src.mesh().size() ? " has " : " is in a world of ", n, " ranks but ", shards.size(),
                  " shards were given (one per rank, in rank order)");
  const size_t es = static_cast<size_t>(element_size(req.dtype));
  RankArrays out;
  out.in_ptrs.resize(n);
  out.out_ptrs.resize(n);
  for (int r = 0; r < n; ++r) {
    RESHARD_REQUIRE(py::isinstance<py::array>(shards[r]), which, "shard of rank ", r, " is not a NumPy array");
    py::array a = py::reinterpret_borrow<py::array>(shards[r]);
    RESHARD_REQUIRE(a.flags() & py::array::c_style, which, "shard of rank ", r, " is not C-contiguous");
    RESHARD_REQUIRE(static_cast<size_t>(a.itemsize()) == es, which, "shard of rank ", r, " has ", a.itemsize(),
                    "-byte elements; dtype ", to_string(req.dtype), " has ", es);
    const char kind = a.dtype().kind();
    RESHARD_REQUIRE(numpy_holds(kind, req.dtype), which, "shard of rank ", r, " is a NumPy array of ",
                    std::string(py::str(a.dtype())), ", which does not hold ", to_string(req.dtype), " values");
    // The executor reads elements in this machine's byte order, at addresses aligned to their size.
    RESHARD_REQUIRE(a.dtype().attr("isnative").cast<bool>(), which, "shard of rank ", r,
                    " is in non-native byte order (dtype ", std::string(py::str(a.dtype())),
                    "); convert it with astype(dtype.newbyteorder('='))");
    RESHARD_REQUIRE(a.attr("flags").attr("aligned").cast<bool>(), which, "shard of rank ", r,
                    " is not aligned to its element size; pass a copy");
    const Box box = src.box(r);
    Dims got(static_cast<int>(a.ndim()));
    for (int d = 0; d < got.size(); ++d) got[d] = a.shape(d);
    RESHARD_REQUIRE(got == box.shape, which, "shard of rank ", r, " has shape ", shape_text(got), "; layout ",
                    src.str(), " gives rank ", r, " shape ", shape_text(box.shape));
    const Box out_box = dst.box(r);
    std::vector<py::ssize_t> out_shape(out_box.shape.begin(), out_box.shape.end());
    py::array o(req.to_dtype == req.dtype ? a.dtype() : numpy_dtype(req.to_dtype), out_shape);
    out.in_ptrs[r] = a.data();
    out.out_ptrs[r] = o.mutable_data();
    out.inputs.push_back(std::move(a));
    out.outputs.push_back(std::move(o));
  }
  return out;
}

py::list result_of(RankArrays& arrays) {
  py::list result;
  for (py::array& o : arrays.outputs) result.append(std::move(o));
  return result;
}

// Runs body(rank, comm, device) for every rank of a host world of n ranks, each on its own thread.
template <class Body>
void on_host_ranks(int n, Body body) {
  HostWorld world(n);
  run_ranks(
      n,
      [&](int r) {
        HostCommunicator comm(world, r);
        HostDevice device;
        body(r, comm, device);
      },
      &world);
}

py::list run_host(const PlanArgs& args, const py::list& shards) {
  PlanRequest req = make_plan_request(args);
  const int n = req.src.mesh().world_size();
  RankArrays arrays = take_shards(req, shards, "");
  {
    py::gil_scoped_release release;
    const Plan plan = plan_request(req);
    on_host_ranks(n, [&](int r, HostCommunicator& comm, HostDevice& device) {
      Redistributor redistributor(plan, comm, device);
      redistributor.run(arrays.in_ptrs[r], arrays.out_ptrs[r], nullptr);
      redistributor.wait(nullptr);
    });
  }
  return result_of(arrays);
}

// A batch: every tensor planned with its own arguments (transport auto as nccl for more than one), one executor per
// rank, one call for every tensor.
py::list run_host_batch(const std::vector<PlanArgs>& args, const py::list& shard_lists) {
  RESHARD_REQUIRE(!args.empty(), "run_host_batch needs at least one tensor");
  RESHARD_REQUIRE(args.size() == shard_lists.size(), args.size(), " tensors but ", shard_lists.size(),
                  " lists of shards");
  std::vector<PlanRequest> reqs;
  std::vector<RankArrays> arrays;
  for (size_t t = 0; t < args.size(); ++t) {
    const std::string which = cat("tensor ", t, ": ");
    reqs.push_back(make_batch_request(args[t], t));
    RESHARD_REQUIRE(py::isinstance<py::list>(shard_lists[t]), which, "the shards are not a list");
    arrays.push_back(take_shards(reqs.back(), py::reinterpret_borrow<py::list>(shard_lists[t]), which));
  }
  const int n = reqs.front().src.mesh().world_size();
  {
    py::gil_scoped_release release;
    std::vector<std::shared_ptr<const Plan>> plans;
    for (size_t t = 0; t < reqs.size(); ++t) {
      PlanOptions o = reqs[t].options;
      if (reqs.size() > 1 && o.transport == Transport::kAuto) o.transport = Transport::kNccl;
      try {
        const PlanRequest& q = reqs[t];
        plans.push_back(std::make_shared<const Plan>(plan_request(PlanRequest{q.src, q.dst, q.dtype, q.to_dtype, o})));
      } catch (const Error& e) {
        throw Error(e.kind(), cat("tensor ", t, ": ", e.what()));
      }
    }
    const PlanBatch batch(std::move(plans));
    on_host_ranks(n, [&](int r, HostCommunicator& comm, HostDevice& device) {
      BatchRedistributor redistributor(batch, comm, device);
      std::vector<const void*> in;
      std::vector<void*> out;
      for (RankArrays& a : arrays) {
        in.push_back(a.in_ptrs[r]);
        out.push_back(a.out_ptrs[r]);
      }
      redistributor.run(in, out, nullptr);
      redistributor.wait(nullptr);
    });
  }
  py::list result;
  for (RankArrays& a : arrays) result.append(result_of(a));
  return result;
}

}  // namespace

void bind_host(py::module_& m) {
  m.def("run_host", &run_host, py::arg("args"), py::arg("shards"),
        "Runs a redistribution on the host backend (one thread per rank): source shards in, target shards out.");
  m.def("run_host_batch", &run_host_batch, py::arg("args"), py::arg("shard_lists"),
        "Runs a batch of redistributions on one mesh in one executor call per rank (host backend): per tensor, source "
        "shards in, target shards out.");
}

}  // namespace reshard::python
