// Plans: make_plan with the CLI's options, and the Plan object (JSON, table, SVG, prices).
#include <pybind11/stl.h>

#include <map>

#include "args.hpp"
#include "bindings.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/plan_option_table.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

std::vector<std::string> placement_strings(const std::vector<Placement>& ps) {
  std::vector<std::string> out;
  for (const Placement& p : ps) out.push_back(to_string(p));
  return out;
}

// Every candidate as a dict: exactly the plan JSON's "candidates" (the same keys, figures and order).
py::object candidates(const Plan& plan) { return py::module_::import("json").attr("loads")(candidates_to_json(plan)); }

// The Plan an object holds. Plan has no Python constructor (plans come from reshard.plan() and Plan.from_json()), but
// Plan.__new__(Plan) still makes an object whose Plan was never constructed: every method refuses it.
const Plan& plan_of(py::handle self) {
  if (!py::isinstance(self, py::type::of<Plan>()))
    throw py::type_error(
        cat("expected a reshard.Plan, got ", std::string(py::str(py::type::of(self).attr("__name__")))));
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  py::detail::value_and_holder vh = inst->get_value_and_holder(py::detail::get_type_info(typeid(Plan)));
  if (!vh || !vh.holder_constructed() || vh.value_ptr<Plan>() == nullptr)
    throw py::type_error("this reshard.Plan was never initialised; plans come from reshard.plan() or Plan.from_json()");
  return *vh.value_ptr<Plan>();
}

// `f(plan)` as a method of the Python Plan, on a checked self.
template <class F>
auto method(F f) {
  return [f](py::handle self) { return f(plan_of(self)); };
}

}  // namespace

void bind_plan(py::module_& m) {
  py::class_<Plan>(m, "Plan", "A plan: the steps that turn every rank's source local tensor into its target one.")
      .def_property_readonly("strategy", method([](const Plan& p) { return std::string(to_string(p.strategy())); }))
      .def_property_readonly("transport", method([](const Plan& p) { return std::string(to_string(p.transport())); }))
      .def_property_readonly("estimated_us", method([](const Plan& p) { return p.estimated_us(); }))
      .def_property_readonly("bytes_moved", method([](const Plan& p) { return p.bytes_moved(); }))
      .def_property_readonly("peak_workspace_bytes", method([](const Plan& p) { return p.peak_workspace_bytes(); }))
      .def_property_readonly("dtype", method([](const Plan& p) { return std::string(to_string(p.dtype())); }))
      .def_property_readonly("to_dtype", method([](const Plan& p) { return std::string(to_string(p.target_dtype())); }))
      .def_property_readonly("mesh", method([](const Plan& p) { return p.src().mesh().shape(); }))
      .def_property_readonly("src_mesh", method([](const Plan& p) { return p.src().mesh().str(); }))
      .def_property_readonly("dst_mesh", method([](const Plan& p) { return p.dst().mesh().str(); }))
      .def_property_readonly("world_size", method([](const Plan& p) { return p.src().mesh().world_size(); }))
      .def_property_readonly("global_shape", method([](const Plan& p) { return p.src().global_shape().vec(); }))
      .def_property_readonly("src", method([](const Plan& p) { return placement_strings(p.src().placements()); }))
      .def_property_readonly("dst", method([](const Plan& p) { return placement_strings(p.dst().placements()); }))
      .def_property_readonly("rank", method([](const Plan& p) { return p.scope_rank(); }))
      .def_property_readonly("num_steps", method([](const Plan& p) { return p.steps().size(); }))
      .def_property_readonly("communication_steps", method([](const Plan& p) { return p.communication_steps(); }))
      .def_property_readonly("candidates", method(&candidates))
      .def("json", method([](const Plan& p) { return plan_to_json(p); }),
           "The plan as JSON: exactly what `reshard plan --json` prints.")
      .def("table", method([](const Plan& p) { return plan_table(p); }), "The plan as `reshard plan` prints it.")
      .def("svg", method([](const Plan& p) { return plan_svg(p); }),
           "A picture of the plan (per-step traffic matrices), as `reshard plan --svg` writes.")
      .def_static(
          "from_json", [](const std::string& text) { return plan_from_json(text); }, py::arg("text"),
          "Loads and validates a plan from its JSON.")
      .def("__repr__", method([](const Plan& p) {
             return cat("<reshard.Plan ", p.src().str(), " -> [", to_string(p.dst().placements()), "] ",
                        to_string(p.dtype()), ": ", to_string(p.strategy()), ", ", p.steps().size(), " steps, ",
                        p.estimated_us(), " us>");
           }));

  m.def(
      "make_plan", [](PlanArgs args, std::optional<int> rank) { return plan_request(make_plan_request(args), rank); },
      py::arg("args"), py::arg("rank") = py::none(), py::call_guard<py::gil_scoped_release>());

  m.def(
      "budget_groups",
      [](const std::vector<PlanArgs>& args, std::optional<Index> budget, const std::vector<Index>& held) {
        // Global plans (the same groups on every rank), lowered as the executors run them (ExecutorOptions'
        // defaults: lanes, the default coalescing, pushed one-sided copies).
        std::vector<std::shared_ptr<const Plan>> plans;
        for (size_t t = 0; t < args.size(); ++t) {
          const PlanRequest req = make_batch_request(args[t], t);
          try {
            plans.push_back(std::make_shared<const Plan>(plan_request(req)));
          } catch (const Error& e) {
            throw Error(e.kind(), cat("tensor ", t, ": ", e.what()));
          }
        }
        LowerOptions lowering;
        lowering.one_sided = OneSidedCopies::kPush;
        return budget_groups(PlanBatch(std::move(plans)), budget, lowering, held);
      },
      py::arg("args"), py::arg("budget"), py::arg("held") = std::vector<Index>{},
      py::call_guard<py::gil_scoped_release>(),
      "The tensors (indices) of each consecutive group that fits the memory budget as one batch (plan_batch.hpp); "
      "held[t]: bytes per rank tensor t holds besides the workspace.");

  py::class_<PlanArgs>(m, "PlanArgs", "Arguments of make_plan, as the Python layer converts them.")
      .def(py::init<>())
      .def_readwrite("mesh", &PlanArgs::mesh)
      .def_readwrite("ranks", &PlanArgs::ranks)
      .def_readwrite("dst_mesh", &PlanArgs::dst_mesh)
      .def_readwrite("dst_ranks", &PlanArgs::dst_ranks)
      .def_readwrite("world_size", &PlanArgs::world_size)
      .def_readwrite("src", &PlanArgs::src)
      .def_readwrite("dst", &PlanArgs::dst)
      .def_readwrite("shape", &PlanArgs::shape)
      .def_readwrite("dtype", &PlanArgs::dtype)
      .def_readwrite("to_dtype", &PlanArgs::to_dtype)
      .def_readwrite("options", &PlanArgs::options);
  m.def(
      "plan_option_names",
      [] {
        std::vector<std::string> names;
        for (const PlanOptionSpec& s : plan_option_specs()) names.emplace_back(s.name);
        return names;
      },
      "The plan option table's names (plan_option_table.hpp): the keywords plan() and run_host() accept.");
  m.def(
      "plan_option_kinds",
      [] {
        std::map<std::string, std::string> kinds;
        for (const PlanOptionSpec& s : plan_option_specs()) {
          const char* kind = s.kind == OptionKind::kChoice      ? "choice"
                             : s.kind == OptionKind::kByteCount ? "byte_count"
                             : s.kind == OptionKind::kCount     ? "count"
                             : s.kind == OptionKind::kSwitch    ? "switch"
                                                                : "path";
          kinds.emplace(s.name, kind);
        }
        return kinds;
      },
      "The plan option table's kind of value per name: choice, byte_count, count, switch or path.");
}

}  // namespace reshard::python
