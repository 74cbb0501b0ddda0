// Driver for the C++ reference TACOS, run beside the workbench's own TACOS by
// benchmarks/tacos_scaling.py (environment variable TACOS_CPP).
//
// TACOS: W. Won, M. Elavazhagan, S. Srinivasan, S. Gupta, T. Krishna, "TACOS:
// Topology-Aware Collective Algorithm Synthesizer for Distributed Machine
// Learning", MICRO 2024 (pp. 856-870). This file links against the authors'
// implementation, astra-sim/tacos (v1.3.0, MIT licence):
// benchmarks/tacos_cpp_build.py compiles it with a checkout's library sources.
// It is the workbench's own program, not part of astra-sim/tacos.
//
// Usage: driver mesh|torus A B [C]
//   mesh A B     Mesh2D(A, B)           torus A B     Torus2D(A, B)
//   mesh A B C   Hypercube3D(A, B, C)   torus A B C   Torus3D(A, B, C)
// Every link: 50 GiB/s, 0.5 us. Collective: AllGather(npus, 1), one chunk per
// NPU of 1 GiB / npus bytes (the benchmark's problem).
//
// Output: the two lines the benchmark parses, worded as the reference's own
// example program prints them so that either can be used:
//   Time to solve: X ms       (wall time of Synthesizer::solve alone)
//   Collective Time: Y us     (the schedule's finishing time TACOS claims)

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include <tacos/collective/all_gather.h>
#include <tacos/event_queue/timer.h>
#include <tacos/synthesizer/synthesizer.h>
#include <tacos/topology/hypercube_3d.h>
#include <tacos/topology/mesh_2d.h>
#include <tacos/topology/torus_2d.h>
#include <tacos/topology/torus_3d.h>

namespace {

constexpr double kLinkBandwidthGiBps = 50.0;  // TACOS's unit for bandwidth: GiB/s
constexpr double kLinkLatencyUs = 0.5;        // and for latency: microseconds
constexpr std::int64_t kBufferBytes = std::int64_t{1} << 30;  // the All-Gather's whole output

int usage(const char* program) {
    std::cerr << "usage: " << program << " mesh|torus A B [C]  (A, B, C: positive sizes)\n";
    return 2;
}

// A positive int from the whole of `text`; 0 when it is anything else, so a
// typo is refused instead of being read as a prefix (as atoi would).
int parse_size(const char* text) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value <= 0 || value > 1 << 20) {
        return 0;
    }
    return static_cast<int>(value);
}

// Synthesizes the All-Gather on `topology` and prints the timings.
// Takes the concrete topology by reference: tacos::Topology has no virtual
// destructor, so the driver never owns one through a base-class pointer.
int synthesize_and_report(const tacos::Topology& topology) {
    const int npus = topology.npusCount();
    const auto collective = tacos::AllGather(npus, 1);
    const tacos::Collective::ChunkSize chunk_bytes = kBufferBytes / npus;

    auto timer = tacos::Timer();
    auto synthesizer = tacos::Synthesizer();
    timer.start();
    const auto collective_us = synthesizer.solve(topology, collective, chunk_bytes);
    timer.stop();

    // The reference seeds its tie-breaking from std::random_device, so the
    // collective time can differ slightly from run to run; nothing to fix here.
    std::cout << std::fixed;
    std::cout.precision(3);
    std::cout << "NPUs: " << npus << ", chunk: " << chunk_bytes << " bytes\n";
    std::cout << "Time to solve: " << timer.time() / 1000.0 << " ms\n";  // Timer counts microseconds
    std::cout << "Collective Time: " << collective_us << " us" << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 && argc != 5) {
        return usage(argv[0]);
    }
    const std::string kind = argv[1];
    if (kind != "mesh" && kind != "torus") {
        return usage(argv[0]);
    }
    int size[3] = {0, 0, 0};
    for (int i = 2; i < argc; ++i) {
        size[i - 2] = parse_size(argv[i]);
        if (size[i - 2] == 0) {
            return usage(argv[0]);
        }
    }

    const double bw = kLinkBandwidthGiBps;
    const double lat = kLinkLatencyUs;
    if (argc == 4) {
        if (kind == "mesh") {
            return synthesize_and_report(tacos::Mesh2D(size[0], size[1], bw, lat));
        }
        return synthesize_and_report(tacos::Torus2D(size[0], size[1], bw, lat));
    }
    // Three sizes: the reference names its 3D mesh "Hypercube3D".
    if (kind == "mesh") {
        return synthesize_and_report(tacos::Hypercube3D(size[0], size[1], size[2], bw, lat));
    }
    return synthesize_and_report(tacos::Torus3D(size[0], size[1], size[2], bw, lat));
}
