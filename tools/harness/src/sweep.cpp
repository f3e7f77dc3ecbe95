#include "reshard/sweep.hpp"

#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "reshard/detail/json_text.hpp"
#include "reshard/overlap.hpp"

namespace reshard {
namespace {

std::vector<std::vector<Placement>> all_pairs_side(int mesh_ndim, const std::vector<std::string>& options) {
  std::vector<std::vector<Placement>> out{{}};
  for (int k = 0; k < mesh_ndim; ++k) {
    std::vector<std::vector<Placement>> next;
    for (const auto& p : out)
      for (const std::string& o : options) {
        next.push_back(p);
        next.back().push_back(parse_placement(o));
      }
    out = std::move(next);
  }
  return out;
}

std::string mesh_text(const std::vector<int>& m) { return Mesh(m).str(); }

// The largest local copy any rank makes (bytes it keeps from source to target).
Index max_local_bytes(const Layout& src, const Layout& dst, int es) {
  Index worst = 0;
  for (int r = 0; r < src.mesh().size(); ++r) worst = std::max(worst, volume(intersect(src.box(r), dst.box(r))) * es);
  return worst;
}

void header(std::ostream& log, const SweepResult& res, double link, double copy) {
  log << "# reshard bench: link " << std::fixed << std::setprecision(1) << link << " GB/s (cudaMemcpyPeer "
      << res.link.peer_copy_GBps << ", NCCL send/recv " << res.link.nccl_p2p_GBps << "), device copy " << copy
      << " GB/s\n"
      << "# algbw = tensor bytes / time; busbw = slowest rank's max(bytes in, bytes out) / time;\n"
      << "# bound = max(that max / link, slowest rank's local bytes / device copy); decimal GB/s; * = auto's choice\n";
  log << std::left << std::setw(8) << "# mesh" << std::setw(9) << "from" << std::setw(9) << "to" << std::setw(13)
      << "shape" << std::setw(6) << "dtype" << std::setw(12) << "strategy" << std::right << std::setw(12) << "bytes"
      << std::setw(11) << "time(us)" << std::setw(11) << "graph(us)" << std::setw(10) << "algbw" << std::setw(9)
      << "busbw" << std::setw(11) << "bound(us)" << std::setw(8) << "%bound" << std::setw(10) << "est(us)"
      << std::setw(7) << "wrong\n";
}

void line(std::ostream& log, const SweepRow& r) {
  log << std::left << std::setw(8) << ("  " + r.mesh) << std::setw(9) << r.from << std::setw(9) << r.to << std::setw(13)
      << r.shape << std::setw(6) << r.dtype << std::setw(12) << (r.strategy + (r.auto_choice ? "*" : "")) << std::right
      << std::setw(12) << r.tensor_bytes << std::fixed << std::setprecision(1) << std::setw(11) << r.median_us
      << std::setw(11) << r.graph_us << std::setprecision(2) << std::setw(10) << r.algbw << std::setw(9) << r.busbw
      << std::setprecision(1) << std::setw(11) << r.bound_us << std::setw(7)
      << (r.median_us > 0 ? 100.0 * r.bound_us / r.median_us : 0.0) << "%" << std::setw(10) << r.estimated_us
      << std::setw(7) << r.wrong << "\n";
  log.flush();
}

}  // namespace

Dims sweep_shape(Index bytes, DType dtype) {
  Index n = std::max<Index>(1, bytes / element_size(dtype));
  int bits = 0;
  while ((Index(1) << (bits + 1)) <= n) ++bits;
  Index rows = Index(1) << (bits / 2);
  return Dims{rows, n / rows};
}

SweepResult run_sweep(const SweepOptions& in, std::ostream& log) {
  SweepOptions o = in;
  const int gpus = local_gpu_count();
  if (o.meshes.empty()) {
    int n = o.backend == Backend::kNccl ? std::max(gpus, 1) : 2;
    o.meshes = {{n}};
    if (n >= 2) {
      o.meshes.push_back({1, n});
      o.meshes.push_back({n, 1});
    }
    if (n >= 4) o.meshes.push_back({2, n / 2});
    if (n >= 8) {
      o.meshes.push_back({n / 2, 2});
      o.meshes.push_back({2, 2, n / 4});
    }
  }
  if (o.sizes_bytes.empty())
    for (Index s = Index(1) << 20; s <= (Index(1) << 30); s *= 4) o.sizes_bytes.push_back(s);

  SweepResult res;
  double link = o.plan.profile.intra_node.p2p.bandwidth_GBps, copy = o.plan.profile.copy.bandwidth_GBps;
  if (o.backend == Backend::kNccl && o.measure_link && gpus >= 2) {
    res.link = measure_links();
    link = std::max(res.link.peer_copy_GBps, res.link.nccl_p2p_GBps);
    copy = res.link.device_copy_GBps;
  }
  header(log, res, link, copy);
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  std::map<int, std::unique_ptr<LocalRunner>> runners;
  for (const auto& m : o.meshes) {
    Mesh mesh(m);
    auto& runner = runners[mesh.size()];
    if (!runner) runner = std::make_unique<LocalRunner>(o.backend, mesh.size());
    auto sides = all_pairs_side(mesh.ndim(), o.placements);
    for (const auto& from : sides) {
      for (const auto& to : sides) {
        for (DType dtype : o.dtypes) {
          for (Index size : o.sizes_bytes) {
            Dims shape = sweep_shape(size, dtype);
            Layout src(mesh, from, shape), dst(mesh, to, shape);
            cases.push_back({{"mesh", m},
                             {"from", to_string(from)},
                             {"to", to_string(to)},
                             {"shape", shape.vec()},
                             {"dtype", std::string(to_string(dtype))}});
            const int es = element_size(dtype);
            TrafficBound tb = traffic_bound(src, dst, o.plan.topology, es);
            double bound = std::max(tb.max_rank_bytes / (link * 1e3), max_local_bytes(src, dst, es) / (copy * 1e3));
            PlanOptions po = o.plan;
            po.strategy = Strategy::kAuto;
            Plan automatic = make_plan(src, dst, dtype, po);
            for (Strategy s : o.strategies) {
              const Candidate* cand = nullptr;
              for (const Candidate& c : automatic.candidates())
                if (c.strategy == s) cand = &c;
              if (!cand || !cand->available) continue;
              po.strategy = s;
              Plan plan = make_plan(src, dst, dtype, po);
              RunOptions ro;
              ro.iters = o.iters;
              ro.warmup = o.warmup;
              RunResult r = runner->run(plan, ro);
              SweepRow row;
              row.mesh = mesh_text(m);
              row.from = to_string(from);
              row.to = to_string(to);
              row.shape = to_string(shape);
              row.dtype = std::string(to_string(dtype));
              row.strategy = std::string(to_string(s));
              row.auto_choice = automatic.strategy() == s;
              row.tensor_bytes = src.global_volume() * es;
              row.max_rank_bytes = tb.max_rank_bytes;
              row.estimated_us = plan.estimated_us();
              row.median_us = r.median_us;
              row.algbw = r.median_us > 0 ? row.tensor_bytes / (r.median_us * 1e3) : 0;
              row.busbw = r.median_us > 0 ? tb.max_rank_bytes / (r.median_us * 1e3) : 0;
              row.bound_us = bound;
              row.wrong = r.wrong_elements;
              row.checked = r.checked_elements;
              row.workspace = r.workspace_bytes;
              for (const Step& st : plan.steps()) {
                if (!row.steps.empty()) row.steps += '+';
                row.steps += to_string(st.kind);
              }
              if (row.auto_choice && o.backend == Backend::kNccl && row.tensor_bytes <= o.graph_max_bytes) {
                RunOptions g = ro;
                g.cuda_graph = true;
                RunResult gr = runner->run(plan, g);
                row.graph_us = gr.median_us;
                row.wrong += gr.wrong_elements;
                row.checked += gr.checked_elements;
              }
              line(log, row);
              res.rows.push_back(std::move(row));
            }
          }
        }
      }
    }
  }
  if (!o.cases_path.empty()) {
    std::ofstream f(o.cases_path);
    f << cases.dump(1) << "\n";
  }
  if (!o.csv_path.empty()) {
    std::ofstream f(o.csv_path);
    f << "mesh,from,to,shape,dtype,strategy,auto_choice,tensor_bytes,max_rank_bytes,estimated_us,median_us,graph_us,"
         "algbw_GBps,busbw_GBps,bound_us,wrong,checked,workspace_bytes,steps\n";
    for (const SweepRow& r : res.rows)
      f << r.mesh << ",\"" << r.from << "\",\"" << r.to << "\"," << r.shape << "," << r.dtype << "," << r.strategy
        << "," << r.auto_choice << "," << r.tensor_bytes << "," << r.max_rank_bytes << "," << r.estimated_us << ","
        << r.median_us << "," << r.graph_us << "," << r.algbw << "," << r.busbw << "," << r.bound_us << "," << r.wrong
        << "," << r.checked << "," << r.workspace << "," << r.steps << "\n";
  }
  if (!o.json_path.empty()) {
    nlohmann::ordered_json j;
    j["link"] = {{"peer_copy_GBps", res.link.peer_copy_GBps},
                 {"nccl_p2p_GBps", res.link.nccl_p2p_GBps},
                 {"device_copy_GBps", res.link.device_copy_GBps},
                 {"bytes", res.link.bytes},
                 {"bound_link_GBps", link},
                 {"bound_copy_GBps", copy}};
    j["profile"] = o.plan.profile.name;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const SweepRow& r : res.rows)
      rows.push_back({{"mesh", r.mesh},
                      {"from", r.from},
                      {"to", r.to},
                      {"shape", r.shape},
                      {"dtype", r.dtype},
                      {"strategy", r.strategy},
                      {"auto_choice", r.auto_choice},
                      {"tensor_bytes", r.tensor_bytes},
                      {"max_rank_bytes", r.max_rank_bytes},
                      {"estimated_us", r.estimated_us},
                      {"median_us", r.median_us},
                      {"graph_us", r.graph_us},
                      {"algbw_GBps", r.algbw},
                      {"busbw_GBps", r.busbw},
                      {"bound_us", r.bound_us},
                      {"wrong", r.wrong},
                      {"checked", r.checked},
                      {"workspace_bytes", r.workspace},
                      {"steps", r.steps}});
    j["rows"] = std::move(rows);
    std::ofstream f(o.json_path);
    f << detail::json_text(j) << "\n";
  }
  return res;
}

}  // namespace reshard
