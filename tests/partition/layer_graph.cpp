// Layer graphs: graph.txt reader errors, round trip, the antichain DAG.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "pipeplan/partition/antichain.hpp"
#include "pipeplan/partition/layer_graph.hpp"
#include "support.hpp"

using namespace pipeplan::partition;

namespace {

std::string node_line(const std::string& id) {
    return id + " -- Layer -- forward_compute_time=1.000, backward_compute_time=2.000, "
                "activation_size=100.000, parameter_size=10.000\n";
}

/// The input_error thrown by parsing `text`.
pipeplan::input_error parse_error(const std::string& text) {
    try {
        (void)parse_layer_graph(text, "g.txt");
    } catch (const pipeplan::input_error& e) {
        return e;
    }
    FAIL("no error for: " << text);
    return pipeplan::input_error("", 0, "", "");
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("graph.txt: nodes, edges, lists and stage ids") {
    const std::string text = node_line("a") +
                             "b -- Conv -- x -- forward_compute_time=0.500, backward_compute_time=1.500, "
                             "activation_size=[10.000; 20.000], parameter_size=4.000 -- stage_id=3\n"
                             "\ta -- b\n";
    const auto g = parse_layer_graph(text, "g.txt");
    REQUIRE(boost::num_vertices(g) == 2);
    CHECK(boost::num_edges(g) == 1);
    CHECK(g[1].description == "Conv -- x");
    CHECK(g[1].activation_bytes() == 30.0);
    CHECK(g[1].compute_ms() == 2.0);
    CHECK(g[1].stage_id == 3);
    CHECK_FALSE(g[0].stage_id.has_value());
    CHECK(format_layer_graph(g) == text);
}

TEST_CASE("graph.txt: errors name the line") {
    const std::string a = node_line("a");
    const std::string b = node_line("b");
    auto e = parse_error(a + b + "\ta -- c\n");
    CHECK(e.line() == 3);
    CHECK(std::string(e.what()).find("unknown node 'c'") != std::string::npos);
    e = parse_error(a + b + "\ta -- b\n\tb -- a\n");
    CHECK(std::string(e.what()).find("cycle") != std::string::npos);
    CHECK((e.line() == 1 || e.line() == 2));
    e = parse_error(a + "b -- L -- forward_compute_time=abc, backward_compute_time=1, activation_size=1, parameter_size=1\n");
    CHECK(e.line() == 2);
    CHECK(e.column() == "forward_compute_time");
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=-1, activation_size=1, parameter_size=1\n");
    CHECK(e.column() == "backward_compute_time");
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=[1; x], parameter_size=1\n");
    CHECK(e.column() == "activation_size");
    e = parse_error(a + b + a);
    CHECK(e.line() == 3);
    CHECK(std::string(e.what()).find("duplicate node id 'a' (first on line 1)") != std::string::npos);
    e = parse_error(a + "b -- only two\n");
    CHECK(e.line() == 2);
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=1, parameter_size=1\n");
    CHECK(e.line() == 2);
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1 -- stage_id=x\n");
    CHECK(e.column() == "stage_id");
    e = parse_error(a + "\ta\n");
    CHECK(e.line() == 2);
    // Ranges: times in [0, 1e9] ms and sizes in [0, 1e18] bytes, so that sums stay finite.
    e = parse_error(a + "b -- L -- forward_compute_time=1e308, backward_compute_time=1, activation_size=1, parameter_size=1\n");
    CHECK(std::string(e.what()) == "g.txt:2: column 'forward_compute_time': '1e308' is not a number in [0, 1e+09] ms");
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=[1; 1e300], parameter_size=1\n");
    CHECK(std::string(e.what()) == "g.txt:2: column 'activation_size': '1e300' is not a number in [0, 1e+18] bytes");
    e = parse_error(a + "b -- L -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=2e18\n");
    CHECK(e.column() == "parameter_size");
    CHECK_THROWS_AS((void)read_layer_graph("/nonexistent/graph.txt"), pipeplan::input_error);
}

TEST_CASE("graph.txt: the reference graphs round-trip byte for byte" * PIPEPLAN_NEEDS_DATA()) {
    const auto dir = *pipeplan::test::shared_data_dir() / "layer_graphs";
    for (const char* m : {"alexnet", "vgg16", "resnet18", "resnet50", "inception_v3", "densenet121"}) {
        CAPTURE(m);
        const auto path = dir / (std::string(m) + ".txt");
        const auto g = read_layer_graph(path);
        std::string text = read_text(path);
        if (!text.empty() && text.back() != '\n') text.push_back('\n');
        CHECK(format_layer_graph(g) == text);
        CHECK(format_layer_graph(parse_layer_graph(format_layer_graph(g), "again")) == text);
    }
}

TEST_CASE("graph.txt: atomic write and read back") {
    const std::string text = node_line("a") + node_line("b") + "\ta -- b\n";
    auto g = parse_layer_graph(text, "g.txt");
    g[0].stage_id = 0;
    g[1].stage_id = 1;
    const auto path = std::filesystem::temp_directory_path() / "pipeplan_partition_graph_test.txt";
    write_layer_graph(path, g);
    const auto back = read_layer_graph(path);
    CHECK(format_layer_graph(back) == format_layer_graph(g));
    CHECK(back[1].stage_id == 1);
    std::filesystem::remove(path);
}

TEST_CASE("antichain DAG: a chain's states are its layers; a diamond's are its cuts") {
    std::string chain = "in -- Input -- forward_compute_time=5.000, backward_compute_time=0.000, activation_size=1.000, parameter_size=0.000\n";
    for (const char* id : {"a", "b", "c"}) chain += node_line(id);
    chain += "\tin -- a\n\ta -- b\n\tb -- c\n";
    const auto g = parse_layer_graph(chain, "chain");
    const auto dag = build_antichain_dag(g);
    REQUIRE(dag.states.size() == 3);
    REQUIRE(dag.inputs.size() == 1);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(dag.states[i].antichain == std::vector<layer_vertex>{i + 1});
        CHECK(dag.states[i].compute_ms == doctest::Approx(3.0 * (i + 1)));  // the input is not counted
        CHECK(dag.states[i].ancestors.size() == i);
    }
    // a -> {b, c} -> d: cuts {a}, {b, a}, {c, a}, {b, c}, {d}; {a} first, {d} last.
    std::string diamond;
    for (const char* id : {"a", "b", "c", "d"}) diamond += node_line(id);
    diamond += "\ta -- b\n\ta -- c\n\tb -- d\n\tc -- d\n";
    const auto d = build_antichain_dag(parse_layer_graph(diamond, "diamond"));
    REQUIRE(d.states.size() == 5);
    CHECK(d.states.front().antichain == std::vector<layer_vertex>{0});
    CHECK(d.states.back().antichain == std::vector<layer_vertex>{3});
    CHECK(d.states.back().ancestors.size() == 4);
    CHECK(d.states.back().compute_ms == doctest::Approx(4 * 3.0));
    // every state's ancestors come before it (a topological order)
    for (std::size_t p = 0; p < d.states.size(); ++p)
        for (std::size_t q : d.states[p].ancestors) CHECK(q < p);
}
