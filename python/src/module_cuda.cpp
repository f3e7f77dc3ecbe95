// reshard._cuda: NCCL communicators bootstrapped from a unique id (reshard.torch passes it through the process
// group's store), the CUDA device, and prepared redistributions run on a caller's stream. Built with the CUDA backend
// only; imported by reshard.torch after torch, so that the process has one NCCL (PyTorch's).
#include <cuda_runtime.h>
#include <nccl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>

#include "args.hpp"
#include "buffers.hpp"
#include "errors.hpp"
#include "redistributor.hpp"
#include "reshard/block_scale_cuda.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/nccl_communicator.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

std::shared_ptr<NcclCommunicator> make_communicator(const py::bytes& unique_id, int nranks, int rank, int device,
                                                    double timeout_s) {
  std::string id_bytes = unique_id;
  RESHARD_REQUIRE(id_bytes.size() == sizeof(ncclUniqueId), "NCCL unique id must be ", sizeof(ncclUniqueId),
                  " bytes, got ", id_bytes.size());
  RESHARD_REQUIRE(nranks >= 1 && rank >= 0 && rank < nranks, "rank ", rank, " is not in 0..", nranks - 1);
  RESHARD_REQUIRE(std::isfinite(timeout_s) && timeout_s > 0 && timeout_s <= 1e6,
                  "timeout must be from above 0 to 1e6 seconds, got ", timeout_s);
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof(id));
  NcclOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  ncclComm_t comm = nullptr;
  {
    py::gil_scoped_release release;
    RESHARD_CUDA_CHECK(cudaSetDevice(device));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    ncclResult_t res = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
    if (res != ncclSuccess) detail::throw_nccl(res, nullptr, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  return std::make_shared<NcclCommunicator>(comm, /*owned=*/true, options);
}

// A Redistributor with the communicator and device it runs on (kept alive as long as it is).
struct CudaRedistributor {
  std::shared_ptr<NcclCommunicator> comm;
  std::shared_ptr<CudaDevice> device;
  std::unique_ptr<Redistributor> redistributor;
};

// Every request's plan for `rank`, with transport nccl: the fallback of plans whose buffers cannot be mapped.
FallbackPlans nccl_fallback(std::vector<PlanRequest> reqs, int rank) {
  return [reqs = std::move(reqs), rank] {
    std::vector<std::shared_ptr<const Plan>> plans;
    for (const PlanRequest& r : reqs) {
      PlanOptions o = r.options;
      o.transport = Transport::kNccl;
      plans.push_back(
          std::make_shared<const Plan>(plan_request(PlanRequest{r.src, r.dst, r.dtype, r.to_dtype, o}, rank)));
    }
    return PlanBatch(std::move(plans));
  };
}

std::unique_ptr<CudaRedistributor> make_redistributor(std::shared_ptr<NcclCommunicator> comm,
                                                      std::shared_ptr<CudaDevice> device, const PlanArgs& args) {
  PlanRequest req = make_plan_request(args);
  RESHARD_REQUIRE(req.src.mesh().world_size() == comm->size(), "mesh ", req.src.mesh().str(), " has ",
                  req.src.mesh().world_size(), " ranks but the communicator has ", comm->size());
  auto out = std::make_unique<CudaRedistributor>();
  out->comm = std::move(comm);
  out->device = std::move(device);
  py::gil_scoped_release release;
  RESHARD_CUDA_CHECK(cudaSetDevice(out->device->ordinal()));
  const int rank = out->comm->rank();
  Plan plan = plan_request(req, rank);
  out->redistributor =
      std::make_unique<Redistributor>(std::move(plan), *out->comm, *out->device, nccl_fallback({req}, rank));
  return out;
}

// A BatchRedistributor with the communicator and device it runs on.
struct CudaBatchRedistributor {
  std::shared_ptr<NcclCommunicator> comm;
  std::shared_ptr<CudaDevice> device;
  std::unique_ptr<BatchRedistributor> redistributor;
  std::vector<const void*> in;
  std::vector<void*> out;
};

std::unique_ptr<CudaBatchRedistributor> make_batch_redistributor(std::shared_ptr<NcclCommunicator> comm,
                                                                 std::shared_ptr<CudaDevice> device,
                                                                 const std::vector<PlanArgs>& args) {
  RESHARD_REQUIRE(!args.empty(), "a batch needs at least one tensor");
  std::vector<PlanRequest> reqs;
  for (size_t t = 0; t < args.size(); ++t) {
    reqs.push_back(make_batch_request(args[t], t));
    RESHARD_REQUIRE(reqs.back().src.mesh().world_size() == comm->size(), "tensor ", t, ": mesh ",
                    reqs.back().src.mesh().str(), " has ", reqs.back().src.mesh().world_size(),
                    " ranks but the communicator has ", comm->size());
  }
  auto out = std::make_unique<CudaBatchRedistributor>();
  out->comm = std::move(comm);
  out->device = std::move(device);
  py::gil_scoped_release release;
  RESHARD_CUDA_CHECK(cudaSetDevice(out->device->ordinal()));
  const int rank = out->comm->rank();
  // One set of options for the batch: make_plan_batch plans every member alike.
  const PlanOptions& o = reqs.front().options;
  std::vector<BatchEntry> entries;
  for (size_t t = 0; t < reqs.size(); ++t) {
    const PlanOptions& mine = reqs[t].options;
    RESHARD_REQUIRE(mine.strategy == o.strategy && mine.transport == o.transport && mine.fusion == o.fusion &&
                        mine.buffers_change == o.buffers_change && mine.low_sm == o.low_sm &&
                        mine.memory_budget_bytes == o.memory_budget_bytes &&
                        mine.max_collectives == o.max_collectives &&
                        mine.pipeline_chunk_bytes == o.pipeline_chunk_bytes && mine.profile.name == o.profile.name,
                    "tensor ", t, ": its plan options differ from tensor 0's; a batch plans every tensor alike");
    entries.push_back(BatchEntry{reqs[t].src, reqs[t].dst, reqs[t].dtype, reqs[t].to_dtype});
  }
  out->redistributor = std::make_unique<BatchRedistributor>(make_plan_batch(entries, o, rank), *out->comm, *out->device,
                                                            nccl_fallback(std::move(reqs), rank));
  out->in.resize(args.size());
  out->out.resize(args.size());
  return out;
}

void* pointer_of(py::handle obj, std::uintptr_t stream, size_t bytes, int device, const char* what,
                 std::vector<py::object>& keepalive) {
  BufferRef buf = buffer_from(obj, stream, what);
  check_buffer_size(buf, bytes, MemoryKind::kCuda, what);
  RESHARD_REQUIRE(buf.memory != MemoryKind::kCuda || buf.device < 0 || buf.device == device, what,
                  ": tensor is on GPU ", buf.device, ", this rank's GPU is ", device);
  keepalive.push_back(std::move(buf.keepalive));
  return buf.data;
}

}  // namespace
}  // namespace reshard::python

PYBIND11_MODULE(_cuda, m) {
  using namespace reshard;
  using namespace reshard::python;
  m.doc() = "reshard's CUDA backend: NCCL communicators and redistributions on a caller's stream (reshard.torch)";
  register_error_translation(m);

  m.def("device_count", &cuda_device_count);
  m.def("nccl_version", &nccl_version);
  m.def("nccl_unique_id", [] {
    ncclUniqueId id;
    ncclResult_t res = ncclGetUniqueId(&id);
    if (res != ncclSuccess) detail::throw_nccl(res, nullptr, "ncclGetUniqueId", __FILE__, __LINE__);
    return py::bytes(reinterpret_cast<const char*>(&id), sizeof(id));
  });

  m.def(
      "quantize_blocks",
      [](std::uintptr_t in, const std::string& from, Index rows, Index cols, std::uintptr_t out, const std::string& to,
         std::uintptr_t scale_inv, Index block, int device, std::uintptr_t stream) {
        RESHARD_REQUIRE(rows == 0 || cols == 0 || (in != 0 && out != 0 && scale_inv != 0),
                        "quantize_blocks: a null address for a ", rows, "x", cols, " matrix");
        RESHARD_CUDA_CHECK(cudaSetDevice(device));
        quantize_blocks_on_gpu(reinterpret_cast<const void*>(in), parse_dtype(from), rows, cols,
                               reinterpret_cast<void*>(out), parse_dtype(to), reinterpret_cast<float*>(scale_inv),
                               block, reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("input"), py::arg("from_dtype"), py::arg("rows"), py::arg("cols"), py::arg("output"), py::arg("to_dtype"),
      py::arg("scale_inv"), py::arg("block"), py::arg("device"), py::arg("stream"),
      py::call_guard<py::gil_scoped_release>(),
      "Block-scaled fp8 of a dense rows x cols matrix on GPU `device`, enqueued on `stream` (data addresses; the "
      "caller has checked the tensors: reshard.torch does).");

  py::class_<NcclCommunicator, std::shared_ptr<NcclCommunicator>>(
      m, "NcclCommunicator", "An NCCL communicator reshard created and owns (destroyed with this object).")
      .def(py::init(&make_communicator), py::arg("unique_id"), py::arg("nranks"), py::arg("rank"), py::arg("device"),
           py::arg("timeout_s") = 120.0,
           "Joins the communicator of `unique_id` (collective: every rank calls it) on GPU `device`.")
      .def_property_readonly("rank", &NcclCommunicator::rank)
      .def_property_readonly("size", &NcclCommunicator::size)
      .def("abort", &NcclCommunicator::abort, "Aborts the communicator and its groups (pending work is abandoned).");

  py::class_<CudaDevice, std::shared_ptr<CudaDevice>>(m, "CudaDevice", "Copy kernels and helper streams on one GPU.")
      .def(py::init<int>(), py::arg("device"))
      .def_property_readonly("ordinal", &CudaDevice::ordinal);

  py::class_<CudaRedistributor>(m, "Redistributor",
                                "One rank's prepared redistribution: plan and executor; run() enqueues on a stream.")
      .def(py::init(&make_redistributor), py::arg("comm"), py::arg("device"), py::arg("args"),
           "Plans (for this rank) and prepares; collective over the communicator's ranks.")
      .def_property_readonly("input_bytes", [](const CudaRedistributor& r) { return r.redistributor->input_bytes(); })
      .def_property_readonly("output_bytes", [](const CudaRedistributor& r) { return r.redistributor->output_bytes(); })
      .def_property_readonly("workspace_bytes",
                             [](const CudaRedistributor& r) { return r.redistributor->workspace_bytes(); })
      .def_property_readonly("plan", [](const CudaRedistributor& r) { return r.redistributor->plan(); })
      .def(
          "run",
          [](CudaRedistributor& r, py::handle input, py::handle output, std::uintptr_t stream) {
            std::vector<py::object> keepalive;
            const int dev = r.device->ordinal();
            const void* in = pointer_of(input, stream, r.redistributor->input_bytes(), dev, "input", keepalive);
            void* out = pointer_of(output, stream, r.redistributor->output_bytes(), dev, "output", keepalive);
            py::gil_scoped_release release;
            r.redistributor->run(in, out, reinterpret_cast<StreamHandle>(stream));
          },
          py::arg("input"), py::arg("output"), py::arg("stream"),
          "Enqueues the redistribution on `stream` (a cudaStream_t as an int). input/output: tensors (DLPack or "
          "__cuda_array_interface__, dense) or data addresses.")
      .def(
          "run_ptr",
          [](CudaRedistributor& r, std::uintptr_t input, std::uintptr_t output, std::uintptr_t stream) {
            py::gil_scoped_release release;
            r.redistributor->run(reinterpret_cast<const void*>(input), reinterpret_cast<void*>(output),
                                 reinterpret_cast<StreamHandle>(stream));
          },
          py::arg("input"), py::arg("output"), py::arg("stream"),
          "run() for data addresses only: the hot path of reshard.torch.")
      .def(
          "wait",
          [](CudaRedistributor& r, std::uintptr_t stream) {
            r.redistributor->wait(reinterpret_cast<StreamHandle>(stream));
          },
          py::arg("stream"), py::call_guard<py::gil_scoped_release>(),
          "Blocks until the work on `stream` is done (with the communicator's timeout).")
      .def_property_readonly(
          "fallback_runs", [](const CudaRedistributor& r) { return r.redistributor->fallback_runs(); },
          "Runs on the NCCL fallback plan (the peers could not map this rank's or a peer's buffers).");

  py::class_<CudaBatchRedistributor>(m, "BatchRedistributor",
                                     "One rank's prepared batch of redistributions: one executor, one run for all.")
      .def(py::init(&make_batch_redistributor), py::arg("comm"), py::arg("device"), py::arg("args"),
           "Plans every tensor (for this rank) and prepares one executor; collective over the communicator's ranks.")
      .def_property_readonly("size", [](const CudaBatchRedistributor& r) { return r.redistributor->batch().size(); })
      .def("input_bytes", [](const CudaBatchRedistributor& r, size_t t) { return r.redistributor->input_bytes(t); })
      .def("output_bytes", [](const CudaBatchRedistributor& r, size_t t) { return r.redistributor->output_bytes(t); })
      .def_property_readonly("estimated_us",
                             [](const CudaBatchRedistributor& r) { return r.redistributor->batch().estimated_us(); })
      .def_property_readonly("fallback_runs",
                             [](const CudaBatchRedistributor& r) { return r.redistributor->fallback_runs(); })
      .def(
          "run_ptrs",
          [](CudaBatchRedistributor& r, const std::vector<std::uintptr_t>& inputs,
             const std::vector<std::uintptr_t>& outputs, std::uintptr_t stream) {
            RESHARD_REQUIRE(inputs.size() == r.in.size() && outputs.size() == r.out.size(), "a batch of ", r.in.size(),
                            " tensors got ", inputs.size(), " inputs and ", outputs.size(), " outputs");
            for (size_t t = 0; t < r.in.size(); ++t) {
              r.in[t] = reinterpret_cast<const void*>(inputs[t]);
              r.out[t] = reinterpret_cast<void*>(outputs[t]);
            }
            py::gil_scoped_release release;
            r.redistributor->run(r.in, r.out, reinterpret_cast<StreamHandle>(stream));
          },
          py::arg("inputs"), py::arg("outputs"), py::arg("stream"),
          "Enqueues every tensor's redistribution on `stream`: data addresses of each tensor's local input and output "
          "(dense, input_bytes(t) and output_bytes(t) long).")
      .def(
          "wait",
          [](CudaBatchRedistributor& r, std::uintptr_t stream) {
            r.redistributor->wait(reinterpret_cast<StreamHandle>(stream));
          },
          py::arg("stream"), py::call_guard<py::gil_scoped_release>(), "Blocks until the work on `stream` is done.");
}
