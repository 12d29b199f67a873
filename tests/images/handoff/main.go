// Command handoff is the test sidecar of tests/tests/e2e/sidecarset_hot_upgrade.rs: an HTTP
// server (GET /version answers its version) that hands its listening TCP socket to its
// successor, as Envoy's hot restart does, so a SidecarSet hot upgrade refuses no
// connection.
//
// The two containers of a hot sidecar share the pod's network and an emptyDir holding a
// Unix socket. On start the process dials that socket: a predecessor answers with its
// listening socket's descriptor (SCM_RIGHTS), stops accepting, and says so; only then does
// the successor accept. Both hold one socket, so one accept queue: a connection arriving
// in between waits in the queue instead of being refused, and the versions served never
// go back. With no predecessor (no socket file, or a stale one) the process binds the
// port itself. Either way it then serves the Unix socket for its own successor.
//
// The exchange on the Unix socket, one per successor:
//
//	predecessor -> successor: one byte carrying the descriptor
//	successor -> predecessor: "t" (took it)
//	predecessor -> successor: "s" (stopped accepting), or the connection closes
//
// A successor that goes away before "t" leaves the predecessor serving, for the next one.
//
// Readiness: the file -ready-file (in the container's own filesystem) exists once the
// process accepts on the socket. The sidecar's readiness probe tests it, so the SidecarSet
// controller, which empties the old container once the new one is ready, does so only
// after the new one took the socket.
//
// On SIGTERM the process stops handing off (finishing an exchange under way), stops
// accepting if it still does, finishes the requests in flight and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// exchangeTimeout bounds one exchange on the Unix socket, so a stuck peer cannot hold the
// predecessor's handoff (and its SIGTERM) forever.
const exchangeTimeout = 10 * time.Second

type config struct {
	port      int
	socket    string
	version   string
	readyFile string
}

func main() {
	cfg := parseFlags()
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("handoff %s: ", cfg.version))

	listener := acquire(cfg)
	server := newServer(cfg.version)
	go func() {
		err := server.Serve(listener)
		if !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Fatalf("serving: %v", err)
		}
	}()
	if err := os.WriteFile(cfg.readyFile, nil, 0o644); err != nil {
		log.Fatalf("writing the ready file: %v", err)
	}
	h, err := listenHandoff(cfg.socket, listener)
	if err != nil {
		log.Fatalf("serving the handoff socket %s: %v", cfg.socket, err)
	}
	go h.serve()

	terminate := make(chan os.Signal, 1)
	signal.Notify(terminate, syscall.SIGTERM, syscall.SIGINT)
	<-terminate
	if !h.stop() {
		log.Print("terminating with no successor: stop accepting")
		_ = listener.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), exchangeTimeout)
	defer cancel()
	// The listener is closed already, so Shutdown only waits for the requests in flight.
	_ = server.Shutdown(ctx)
	log.Print("exiting")
}

func parseFlags() config {
	var cfg config
	port, _ := strconv.Atoi(envOr("HANDOFF_PORT", "8081"))
	flag.IntVar(&cfg.port, "port", port, "the TCP port served (env HANDOFF_PORT)")
	flag.StringVar(&cfg.socket, "socket", envOr("HANDOFF_SOCKET", "/run/handoff/listener.sock"),
		"the Unix socket, in a directory shared with the successor, the listening socket passes through (env HANDOFF_SOCKET)")
	flag.StringVar(&cfg.version, "version", envOr("HANDOFF_VERSION", "unknown"),
		"the version GET /version answers (env HANDOFF_VERSION)")
	flag.StringVar(&cfg.readyFile, "ready-file", envOr("HANDOFF_READY_FILE", "/tmp/accepting"),
		"created once the process accepts on the socket, for a readiness probe (env HANDOFF_READY_FILE)")
	flag.Parse()
	return cfg
}

func envOr(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	return fallback
}

func newServer(version string) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, version)
	})
	server := &http.Server{Handler: mux, ReadHeaderTimeout: exchangeTimeout}
	// Connection: close, so every request is a new connection from the accept queue and a
	// client sees the handoff at once.
	server.SetKeepAlivesEnabled(false)
	return server
}

// acquire returns the listening socket: the predecessor's, or a new one when there is no
// predecessor. It retries until it has one: a port still held (a predecessor that has
// not opened its Unix socket yet) frees up or gets handed over.
func acquire(cfg config) net.Listener {
	for {
		listener, err := takeOver(cfg.socket)
		if err == nil {
			log.Printf("took the listening socket over from the predecessor")
			return listener
		}
		if errors.Is(err, errNoPredecessor) {
			listener, err = net.Listen("tcp", fmt.Sprintf(":%d", cfg.port))
			if err == nil {
				log.Printf("no predecessor: bound port %d", cfg.port)
				return listener
			}
		}
		log.Printf("no listening socket yet (%v); retrying", err)
		time.Sleep(100 * time.Millisecond)
	}
}

var errNoPredecessor = errors.New("no predecessor answers")

// takeOver receives the listening socket from the predecessor answering on the Unix
// socket at path, and returns once the predecessor no longer accepts from it.
func takeOver(path string) (net.Listener, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		// No file, or a file nobody listens on (the predecessor is gone).
		return nil, fmt.Errorf("%w: %v", errNoPredecessor, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(exchangeTimeout))
	listener, err := receiveListener(conn)
	if err != nil {
		return nil, err
	}
	// From here the socket is ours whatever the predecessor does: it stays open while any
	// process holds it.
	if _, err := conn.Write([]byte("t")); err != nil {
		log.Printf("telling the predecessor it can stop: %v", err)
	}
	reply := make([]byte, 1)
	if n, err := conn.Read(reply); n != 1 || reply[0] != 's' {
		// The predecessor closed the connection (it exited) or did not answer in time.
		log.Printf("the predecessor did not confirm it stopped accepting (%v); accepting anyway", err)
	}
	return listener, nil
}

func receiveListener(conn *net.UnixConn) (net.Listener, error) {
	data := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := conn.ReadMsgUnix(data, oob)
	if err != nil {
		return nil, fmt.Errorf("receiving the listening socket: %w", err)
	}
	messages, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(messages) != 1 {
		return nil, fmt.Errorf("the predecessor sent no descriptor (%d messages, %v)", len(messages), err)
	}
	fds, err := syscall.ParseUnixRights(&messages[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		return nil, fmt.Errorf("the predecessor sent %d descriptors, not one (%v)", len(fds), err)
	}
	// The non-blocking mode belongs to the socket, shared with the predecessor: it is set
	// already, and NewFile leaves an fd that is non-blocking as it is (it would otherwise
	// switch it, under the predecessor's accept loop).
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		_ = syscall.Close(fds[0])
		return nil, fmt.Errorf("the received descriptor: %w", err)
	}
	file := os.NewFile(uintptr(fds[0]), "inherited listener")
	defer file.Close()
	return net.FileListener(file)
}

// handoff serves the Unix socket successors dial, and hands the listening socket to the
// first one that takes it.
type handoff struct {
	unix     *net.UnixListener
	listener net.Listener
	// mu orders an exchange under way before stop.
	mu        sync.Mutex
	handedOff bool
	stopped   bool
}

// listenHandoff serves a Unix socket at path: bound under a temporary name and renamed
// over the predecessor's (or a stale) file, so a successor dialling finds one or the other.
func listenHandoff(path string, listener net.Listener) (*handoff, error) {
	temporary := fmt.Sprintf("%s.%d", path, time.Now().UnixNano())
	unix, err := net.ListenUnix("unix", &net.UnixAddr{Name: temporary, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Closing must not unlink the path: by then it is the successor's socket.
	unix.SetUnlinkOnClose(false)
	if err := os.Rename(temporary, path); err != nil {
		_ = unix.Close()
		_ = os.Remove(temporary)
		return nil, err
	}
	return &handoff{unix: unix, listener: listener}, nil
}

func (h *handoff) serve() {
	for {
		conn, err := h.unix.AcceptUnix()
		if err != nil {
			return // closed: handed off, or stopping
		}
		if h.handOver(conn) {
			return
		}
	}
}

// handOver runs one exchange with a successor; true once the socket is handed over (or
// the process stops).
func (h *handoff) handOver(conn *net.UnixConn) bool {
	defer conn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return true
	}
	_ = conn.SetDeadline(time.Now().Add(exchangeTimeout))
	if err := sendListener(conn, h.listener); err != nil {
		log.Printf("sending the listening socket: %v", err)
		return false
	}
	took := make([]byte, 1)
	if n, err := conn.Read(took); n != 1 || took[0] != 't' {
		log.Printf("the successor went away before taking the socket (%v); still serving", err)
		return false
	}
	// Closing this process's descriptor only: the socket stays open in the successor,
	// connections queue for it.
	_ = h.listener.Close()
	h.handedOff = true
	_ = h.unix.Close()
	if _, err := conn.Write([]byte("s")); err != nil {
		log.Printf("telling the successor we stopped accepting: %v", err)
	}
	log.Print("handed the listening socket to the successor; finishing the requests in flight")
	return true
}

func sendListener(conn *net.UnixConn, listener net.Listener) error {
	raw, err := listener.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	// Control lends the descriptor without changing its mode (File() would dup it).
	err = raw.Control(func(fd uintptr) {
		_, _, sendErr = conn.WriteMsgUnix([]byte{'l'}, syscall.UnixRights(int(fd)), nil)
	})
	if err != nil {
		return err
	}
	return sendErr
}

// stop ends handing off, after an exchange under way; whether the socket was handed over.
func (h *handoff) stop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	_ = h.unix.Close()
	return h.handedOff
}
