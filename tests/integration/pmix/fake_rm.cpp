// SPDX-License-Identifier: LGPL-2.1-or-later
// A fake resource manager for the PMIx tests: a PMIx server host that puts the allocations
// named on its command line into one job's information, starts the child command once per
// rank, and exits with the first failing child's status (0 when all passed).
//
//   fake_rm [--ranks N] [--timeout SECONDS] ALLOCATION... -- CHILD [ARG...]
//   ALLOCATION is one of
//     --alloc ID FIELD=VALUE...    RFC0030 data array; fields: ports type plane endpts
//                                  endpts_nd qos bw (float) bwd (double) key (hex bytes)
//     --proto ID PORTS TYPE PLANE  the pnet/tcp prototype: type and plane under the id key
//     --bare ID RESOURCES          a bare string
//
// Nothing here may hang: every wait for a PMIx callback or a child has a deadline, children
// die with us (PR_SET_PDEATHSIG), and the server's temporary directory is removed on every
// path out, including SIGTERM from the test runner.
#include <pmix.h>
#include <pmix_server.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto callback_deadline = std::chrono::seconds(10);

volatile sig_atomic_t stop_signal = 0;
void on_stop(int signal) { stop_signal = signal; }

[[noreturn]] void usage(const std::string& why) {
    throw std::runtime_error(why + "\nusage: fake_rm [--ranks N] [--timeout S] "
                                   "(--alloc ID F=V... | --proto ID PORTS TYPE PLANE | "
                                   "--bare ID RES)... -- CHILD [ARG...]");
}

// One PMIx upcall completion. They live until exit, since a callback that comes after its
// deadline must still find its target.
struct Completion {
    std::mutex lock;
    std::condition_variable done_cv;
    bool done = false;
    pmix_status_t status = PMIX_SUCCESS;
};
std::deque<Completion> completions;

void complete(pmix_status_t status, void* data) {
    auto* c = static_cast<Completion*>(data);
    std::lock_guard<std::mutex> hold(c->lock);
    c->status = status;
    c->done = true;
    c->done_cv.notify_all();
}

// Runs `start(cbfunc, cbdata)` and waits for its completion, within the deadline.
template <class Start>
void call_and_wait(const char* what, Start start) {
    Completion& c = completions.emplace_back();
    const pmix_status_t rc = start(&complete, &c);
    if (rc == PMIX_OPERATION_SUCCEEDED) return;
    if (rc != PMIX_SUCCESS)
        throw std::runtime_error(std::string(what) + ": " + PMIx_Error_string(rc));
    std::unique_lock<std::mutex> hold(c.lock);
    if (!c.done_cv.wait_for(hold, callback_deadline, [&] { return c.done; }))
        throw std::runtime_error(std::string(what) + ": no answer within 10 s");
    if (c.status != PMIX_SUCCESS)
        throw std::runtime_error(std::string(what) + ": " + PMIx_Error_string(c.status));
}

// A growing pmix_info_t array that frees what it loaded.
class InfoList {
public:
    InfoList() = default;
    InfoList(const InfoList&) = delete;
    InfoList& operator=(const InfoList&) = delete;
    ~InfoList() {
        for (pmix_info_t& i : infos_) PMIX_INFO_DESTRUCT(&i);
    }
    // `data` as PMIx_Info_load takes it: the string itself, else a pointer to the value.
    void add(const std::string& key, const void* data, pmix_data_type_t type) {
        infos_.emplace_back();
        PMIX_INFO_CONSTRUCT(&infos_.back());
        if (PMIx_Info_load(&infos_.back(), key.c_str(), data, type) != PMIX_SUCCESS)
            throw std::runtime_error("cannot load " + key);
    }
    void add_string(const std::string& key, const std::string& value) {
        add(key, value.c_str(), PMIX_STRING);
    }
    // Adds `items` as one data array value; PMIx_Info_load copies it.
    void add_array(const std::string& key, InfoList& items) {
        pmix_data_array_t array{PMIX_INFO, items.size(), items.data()};
        add(key, &array, PMIX_DATA_ARRAY);
    }
    pmix_info_t* data() { return infos_.data(); }
    std::size_t size() const { return infos_.size(); }

private:
    // Contiguous, as PMIx takes it. pmix_info_t is a C struct: moving it when the vector grows
    // moves the pointers it owns, and destroying the moved-from copy frees nothing.
    std::vector<pmix_info_t> infos_;
};

std::vector<std::uint8_t> bytes_from_hex(const std::string& hex) {
    if (hex.size() % 2 != 0) usage("key: odd number of hex digits");
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i < hex.size(); i += 2)
        out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    return out;
}

// One --alloc field, as the PMIx type RFC0030 gives it.
void add_alloc_field(InfoList& items, const std::string& id, const std::string& field) {
    const auto eq = field.find('=');
    if (eq == std::string::npos) usage("--alloc " + id + ": '" + field + "' is not F=V");
    const std::string name = field.substr(0, eq), value = field.substr(eq + 1);
    if (name == "ports")
        items.add_string(id, value);
    else if (name == "type")
        items.add_string("pmix.alloc.nettype", value);
    else if (name == "plane")
        items.add_string("pmix.alloc.netplane", value);
    else if (name == "qos")
        items.add_string("pmix.alloc.netqos", value);
    else if (name == "endpts" || name == "endpts_nd") {
        const std::size_t n = std::stoul(value);
        items.add(name == "endpts" ? "pmix.alloc.endpts" : "pmix.alloc.endpts.nd", &n, PMIX_SIZE);
    } else if (name == "bw") {
        const float bw = std::stof(value);
        items.add("pmix.alloc.bw", &bw, PMIX_FLOAT);
    } else if (name == "bwd") {
        const double bw = std::stod(value);
        items.add("pmix.alloc.bw", &bw, PMIX_DOUBLE);
    } else if (name == "key") {
        std::vector<std::uint8_t> key = bytes_from_hex(value);
        pmix_byte_object_t object{reinterpret_cast<char*>(key.data()), key.size()};
        items.add("pmix.alloc.nsec", &object, PMIX_BYTE_OBJECT);
    } else {
        usage("--alloc " + id + ": unknown field '" + name + "'");
    }
}

struct Options {
    int ranks = 1;
    int timeout_s = 20;
    std::vector<std::string> child;
};

// Parses argv, putting each allocation into `job` as it goes.
Options parse_args(int argc, char** argv, InfoList& job) {
    Options o;
    std::vector<std::string> a(argv + 1, argv + argc);
    std::size_t i = 0;
    const auto next = [&](const char* what) -> const std::string& {
        if (i + 1 >= a.size() || a[i + 1] == "--") usage(std::string("missing ") + what);
        return a[++i];
    };
    for (; i < a.size() && a[i] != "--"; ++i) {
        if (a[i] == "--ranks")
            o.ranks = std::stoi(next("rank count"));
        else if (a[i] == "--timeout")
            o.timeout_s = std::stoi(next("timeout"));
        else if (a[i] == "--bare") {
            const std::string id = next("id");
            job.add_string(id, next("resources"));
        } else if (a[i] == "--proto") {
            const std::string id = next("id");
            InfoList items;
            items.add_string("pmix.alloc.netid", id);
            for (const char* what : {"ports", "type", "plane"}) items.add_string(id, next(what));
            job.add_array(id, items);
        } else if (a[i] == "--alloc") {
            const std::string id = next("id");
            InfoList items;
            items.add_string("pmix.alloc.netid", id);
            while (i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0)
                add_alloc_field(items, id, a[++i]);
            job.add_array(id, items);
        } else {
            usage("unknown argument '" + a[i] + "'");
        }
    }
    if (i + 1 >= a.size()) usage("no child command after --");
    if (o.ranks < 1 || o.ranks > 16) usage("--ranks must be 1..16");
    o.child.assign(a.begin() + static_cast<std::ptrdiff_t>(i) + 1, a.end());
    return o;
}

// What every PMIx job carries, so that the client library finds a complete job; each rank is
// on this node with local rank == rank.
void add_job_shape(InfoList& job, int ranks) {
    const std::uint32_t n = static_cast<std::uint32_t>(ranks);
    for (const char* key : {PMIX_UNIV_SIZE, PMIX_JOB_SIZE, PMIX_LOCAL_SIZE, PMIX_MAX_PROCS})
        job.add(key, &n, PMIX_UINT32);
    std::string peers;
    for (int r = 0; r < ranks; ++r) {
        if (r != 0) peers += ',';
        peers += std::to_string(r);
    }
    job.add_string(PMIX_LOCAL_PEERS, peers);
    for (int r = 0; r < ranks; ++r) {
        InfoList proc;
        const pmix_rank_t rank = static_cast<pmix_rank_t>(r);
        const std::uint16_t local = static_cast<std::uint16_t>(r);
        proc.add(PMIX_RANK, &rank, PMIX_PROC_RANK);
        proc.add(PMIX_LOCAL_RANK, &local, PMIX_UINT16);
        proc.add(PMIX_NODE_RANK, &local, PMIX_UINT16);
        job.add_array(PMIX_PROC_INFO_ARRAY, proc);
    }
}

// A private directory for the server's rendezvous files and shared-memory store, so that runs
// never meet each other; removed whatever happens (pmix.md §5, pitfall 3).
struct TempDir {
    std::string path;
    TempDir() {
        std::string pattern = std::filesystem::temp_directory_path() / "bmi-fake-rm-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

struct Server {
    explicit Server(const std::string& tmpdir) {
        static pmix_server_module_t module{};  // the defaults do for a single-node job
        InfoList init;
        init.add_string(PMIX_SERVER_TMPDIR, tmpdir);
        init.add_string(PMIX_SYSTEM_TMPDIR, tmpdir);
        const pmix_status_t rc = PMIx_server_init(&module, init.data(), init.size());
        if (rc != PMIX_SUCCESS)
            throw std::runtime_error(std::string("PMIx_server_init: ") + PMIx_Error_string(rc));
    }
    ~Server() { PMIx_server_finalize(); }
};

// An environment PMIx_server_setup_fork may grow: it reallocates the array, so it is malloc'd.
struct ChildEnv {
    char** env = nullptr;
    ChildEnv() {
        std::size_t n = 0;
        while (environ[n] != nullptr) ++n;
        env = static_cast<char**>(std::calloc(n + 1, sizeof(char*)));
        for (std::size_t i = 0; i < n; ++i) env[i] = ::strdup(environ[i]);
    }
    ~ChildEnv() {
        for (char** e = env; e != nullptr && *e != nullptr; ++e) std::free(*e);
        std::free(env);
    }
};

pid_t start_child(const pmix_proc_t& proc, const std::vector<std::string>& command) {
    ChildEnv env;
    pmix_status_t rc = PMIx_server_setup_fork(&proc, &env.env);
    if (rc != PMIX_SUCCESS)
        throw std::runtime_error(std::string("PMIx_server_setup_fork: ") + PMIx_Error_string(rc));
    std::vector<char*> args;
    for (const std::string& s : command) args.push_back(const_cast<char*>(s.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
        ::execve(args[0], args.data(), env.env);
        std::fprintf(stderr, "fake_rm: exec %s: %s\n", args[0], std::strerror(errno));
        ::_exit(127);
    }
    return pid;
}

// Waits for every child within the deadline; kills the rest and fails if it passes.
int wait_children(std::vector<pid_t> pids, int timeout_s) {
    std::vector<int> status(pids.size(), -1), fds(pids.size(), -1);
    for (std::size_t i = 0; i < pids.size(); ++i)
        fds[i] = static_cast<int>(::syscall(SYS_pidfd_open, pids[i], 0));
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    std::size_t running = pids.size();
    while (running > 0 && stop_signal == 0 && Clock::now() < deadline) {
        std::vector<pollfd> polled;
        for (std::size_t i = 0; i < pids.size(); ++i)
            if (status[i] < 0) polled.push_back({fds[i], POLLIN, 0});
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        // Without pidfds (kernels before 5.3) poll cannot see an exit: look again soon.
        if (std::find(fds.begin(), fds.end(), -1) != fds.end())
            left = std::min(left, std::chrono::milliseconds(50));
        ::poll(polled.data(), polled.size(), static_cast<int>(std::max<long>(left.count(), 0)));
        for (std::size_t i = 0; i < pids.size(); ++i) {
            int ws = 0;
            if (status[i] >= 0 || ::waitpid(pids[i], &ws, WNOHANG) != pids[i]) continue;
            status[i] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            --running;
        }
    }
    int result = 0;
    for (std::size_t i = 0; i < pids.size(); ++i) {
        if (status[i] < 0) {
            if (stop_signal != 0)
                std::fprintf(stderr, "fake_rm: stopped by signal %d; rank %zu killed\n",
                             static_cast<int>(stop_signal), i);
            else
                std::fprintf(stderr, "fake_rm: rank %zu still running after %d s; killed\n", i,
                             timeout_s);
            ::kill(pids[i], SIGKILL);
            ::waitpid(pids[i], nullptr, 0);
            status[i] = 124;
        } else if (status[i] != 0) {
            std::fprintf(stderr, "fake_rm: rank %zu exited with %d\n", i, status[i]);
        }
        if (result == 0) result = status[i];
        if (fds[i] >= 0) ::close(fds[i]);
    }
    return result;
}

int run(int argc, char** argv) {
    InfoList job;
    const Options options = parse_args(argc, argv, job);
    add_job_shape(job, options.ranks);
    const TempDir tmpdir;
    const Server server(tmpdir.path);
    pmix_nspace_t nspace;
    PMIX_LOAD_NSPACE(nspace, ("fake-rm." + std::to_string(::getpid())).c_str());
    call_and_wait("PMIx_server_register_nspace", [&](pmix_op_cbfunc_t cb, void* data) {
        return PMIx_server_register_nspace(nspace, options.ranks, job.data(), job.size(), cb, data);
    });
    std::vector<pmix_proc_t> procs(static_cast<std::size_t>(options.ranks));
    std::vector<pid_t> pids;
    int result = 0;
    try {
        for (std::size_t r = 0; r < procs.size(); ++r) {
            PMIX_LOAD_PROCID(&procs[r], nspace, static_cast<pmix_rank_t>(r));
            call_and_wait("PMIx_server_register_client", [&](pmix_op_cbfunc_t cb, void* data) {
                return PMIx_server_register_client(&procs[r], ::getuid(), ::getgid(), nullptr, cb,
                                                   data);
            });
        }
        for (const pmix_proc_t& proc : procs) pids.push_back(start_child(proc, options.child));
        result = wait_children(pids, options.timeout_s);
    } catch (...) {
        if (!pids.empty()) wait_children(pids, 0);  // kills and reaps what was started
        throw;
    }
    for (const pmix_proc_t& proc : procs) {
        call_and_wait("PMIx_server_deregister_client", [&](pmix_op_cbfunc_t cb, void* data) {
            PMIx_server_deregister_client(&proc, cb, data);
            return PMIX_SUCCESS;
        });
    }
    call_and_wait("PMIx_server_deregister_nspace", [&](pmix_op_cbfunc_t cb, void* data) {
        PMIx_server_deregister_nspace(nspace, cb, data);
        return PMIX_SUCCESS;
    });
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    struct sigaction stop {};
    stop.sa_handler = on_stop;  // no SA_RESTART: the wait for children wakes up and cleans up
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fake_rm: %s\n", e.what());
        return 2;
    }
}
