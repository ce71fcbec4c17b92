/* The ring and uneven all-to-all cases of simgrid_cases.py, on SimGrid's C++ engine (s4u).
 *
 * The same machine and model as the Python cases: simcoll's switch(n), every host on a
 * split-duplex link of 100 GB/s and 1 us to a star's centre, SimGrid's CM02 flow model
 * with its TCP correction factors off. benchmarks/run.py builds it when g++ and SimGrid's
 * headers are there (Debian: apt install libsimgrid-dev) and prints its figures beside
 * simcoll's:
 *
 *   g++ -O2 -o /tmp/simgrid_cases benchmarks/simgrid_cases.cpp -lsimgrid
 *   /tmp/simgrid_cases ring 256
 *   /tmp/simgrid_cases alltoallv 64
 *
 * It prints one JSON line: the case, n, wall seconds (engine set-up included, as in the
 * Python cases), simulated seconds, messages, peak RSS in bytes and the library's version.
 *
 * Each case runs on the context factory that was faster for it here. The ring's 256 actors
 * take 0.23 to 0.24 s on the default (raw) contexts, 0.36 to 0.39 s on ucontext and 9 to
 * 10 s on threads (N = 256, three runs each). The all-to-all's one actor runs on threads,
 * as SimGrid's Python bindings set them: 12.2 to 26.0 s against 16.9 to 33.8 s on raw
 * contexts at N = 128 (five alternated pairs, threads faster in each; alike at N = 64).
 */

#include <simgrid/s4u.hpp>
#include <simgrid/version.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr double BANDWIDTH = 100e9;
constexpr double LATENCY = 1e-6;

std::vector<sg4::Host*> star(int n)
{
  auto* zone = sg4::create_star_zone("switch");
  std::vector<sg4::Host*> hosts;
  for (int i = 0; i < n; i++) {
    auto* host = zone->create_host("gpu" + std::to_string(i), 1e9);
    auto* link = zone->create_split_duplex_link("link" + std::to_string(i), BANDWIDTH)->set_latency(LATENCY);
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                    {sg4::LinkInRoute(link, sg4::LinkInRoute::Direction::UP)}, true);
    hosts.push_back(host);
  }
  zone->seal();
  return hosts;
}

/* Ring all_reduce of 1 GiB per rank: 2(n-1) steps, each rank sending a chunk of 1 GiB / n
 * to its right neighbour and receiving one from its left. */
long ring(sg4::Engine& engine, int n)
{
  auto hosts = star(n);
  const auto chunk = static_cast<uint64_t>((1UL << 30) / n);
  static int token = 0;
  for (int r = 0; r < n; r++) {
    sg4::Actor::create("rank" + std::to_string(r), hosts[r], [r, n, chunk]() {
      auto* right = sg4::Mailbox::by_name("rank" + std::to_string((r + 1) % n));
      auto* mine  = sg4::Mailbox::by_name("rank" + std::to_string(r));
      for (int step = 0; step < 2 * (n - 1); step++) {
        auto sent = right->put_async(&token, chunk);
        mine->get<int>();
        sent->wait();
      }
    });
  }
  engine.run();
  return 2L * (n - 1) * n;
}

/* Every host i sends (1 + ((7i + 13j) mod 97) / 97) x 65536 float32 to every j != i, all at
 * once. */
long alltoallv(sg4::Engine& engine, int n)
{
  auto hosts = star(n);
  sg4::Actor::create("driver", hosts[0], [hosts, n]() {
    std::vector<sg4::CommPtr> comms;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (i != j) {
          auto size = static_cast<uint64_t>((1 + ((7 * i + 13 * j) % 97) / 97.0) * 65536) * 4;
          comms.push_back(sg4::Comm::sendto_async(hosts[i], hosts[j], size));
        }
    sg4::Comm::wait_all(comms);
  });
  engine.run();
  return static_cast<long>(n) * (n - 1);
}

} // namespace

int main(int argc, char** argv)
{
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ring|alltoallv N\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const int n = std::atoi(argv[2]);
  if ((kind != "ring" && kind != "alltoallv") || n < 2) {
    std::fprintf(stderr, "usage: %s ring|alltoallv N (N >= 2)\n", argv[0]);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> args = {"bench", "--log=root.thres:critical", "--cfg=network/model:CM02",
                                   "--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
                                   "--cfg=network/weight-S:0", "--cfg=network/crosstraffic:0"};
  if (kind == "alltoallv")
    args.emplace_back("--cfg=contexts/factory:thread");
  std::vector<char*> cargs;
  for (auto& a : args)
    cargs.push_back(a.data());
  int cargc = static_cast<int>(cargs.size());
  sg4::Engine engine(&cargc, cargs.data());
  const long messages = kind == "ring" ? ring(engine, n) : alltoallv(engine, n);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  int major = 0;
  int minor = 0;
  int patch = 0;
  sg_version_get(&major, &minor, &patch);
  std::printf("{\"case\": \"%s\", \"n\": %d, \"wall\": %.6f, \"time\": %.17g, \"messages\": %ld, \"rss\": %ld, "
              "\"version\": \"%d.%d.%d\"}\n",
              kind.c_str(), n, wall, sg4::Engine::get_clock(), messages, usage.ru_maxrss * 1024L, major, minor, patch);
  return 0;
}
