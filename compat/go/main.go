// Command compat-go drives franz-go or sarama for pybroker's compatibility matrix
// (compat/clients/franz_go.py, compat/clients/sarama.py).
//
//	compat-go franz|sarama SOCKET WATCH_PID
//
// It serves JSON lines on a Unix socket so that every cell of one matrix run (each a Python
// worker process) reuses one process instead of starting a Go program per call. Each
// connection is a session: a request line, a reply line; a transactional producer lives as
// long as its connection; "member" turns the connection into a stream of taken values until
// the Python side sends "stop". The process ends when WATCH_PID (the matrix runner) is gone or
// after a minute without a connection, so a killed run leaves nothing behind.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// readTimeout bounds every read of expected records, as compat/base.py's TIMEOUT_S.
const readTimeout = 20 * time.Second

type header struct {
	K string  `json:"k"`
	V *string `json:"v"`
}

// rec is a record to write or a record read; bytes travel as base64, null as JSON null.
type rec struct {
	Partition *int32   `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       *string  `json:"key"`
	Value     *string  `json:"value"`
	Headers   []header `json:"headers"`
	Timestamp *int64   `json:"timestamp"`
}

type request struct {
	Op              string            `json:"op"`
	Bootstrap       string            `json:"bootstrap"`
	Topic           string            `json:"topic"`
	Recs            []rec             `json:"recs"`
	Codec           string            `json:"codec"`
	Idempotent      bool              `json:"idempotent"`
	Config          map[string]string `json:"config"`
	Partitions      []int32           `json:"partitions"`
	Start           string            `json:"start"` // "beginning", "offset" or "timestamp"
	At              int64             `json:"at"`
	Count           int               `json:"count"`
	Isolation       string            `json:"isolation"`
	ToEnd           bool              `json:"to_end"`
	Group           string            `json:"group"`
	TransactionalID string            `json:"transactional_id"`
	Commit          bool              `json:"commit"`
	Configs         map[string]string `json:"configs"`
	Name            string            `json:"name"`
	Value           string            `json:"value"`
	Total           int               `json:"total"`
	Cooperative     bool              `json:"cooperative"` // member: the cooperative-sticky assignor
	InstanceID      *string           `json:"instance_id"` // member: group.instance.id (static)
	Times           map[string]int64  `json:"times"`       // offsets_for_times: partition -> ms
	Offsets         map[string]int64  `json:"offsets"`     // alter_group_offsets: partition -> offset
	// member, consume_group: "consumer" joins by KIP-848 (ConsumerGroupHeartbeat), else classic
	GroupProtocol string `json:"group_protocol"`
	// member: subscribe to these topics instead of Topic, or to the topics matching Regex
	Topics []string `json:"topics"`
	Regex  string   `json:"regex"`
}

// failure kinds the Python side maps onto its exceptions.
type failure struct {
	kind string // "produce" (ProduceFailed), "na" (NotApplicable) or "error"
	err  error
}

func (f *failure) Error() string { return f.err.Error() }

func produceFailed(err error) error { return &failure{"produce", err} }
func notApplicable(format string, a ...any) error {
	return &failure{"na", fmt.Errorf(format, a...)}
}

// session is one connection's state; a driver keeps what must outlive a request there.
type session struct {
	enc   *json.Encoder
	lines *bufio.Scanner
	mu    sync.Mutex
	txn   interface{ close() }
}

func (s *session) send(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enc.Encode(v)
}

// driver is one client library's side of the protocol.
type driver interface {
	versions() map[string]string
	handle(s *session, req *request) (any, error)
}

func decode(s *string) []byte {
	if s == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil {
		panic(err)
	}
	return b
}

func encode(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func got(partition int32, offset int64, key, value []byte, headers []header, ts time.Time) rec {
	milli := ts.UnixMilli()
	return rec{Partition: &partition, Offset: offset, Key: encode(key), Value: encode(value),
		Headers: headers, Timestamp: &milli}
}

var active atomic.Int64
var lastSeen atomic.Int64

func serve(d driver, conn net.Conn) {
	active.Add(1)
	defer func() { active.Add(-1); lastSeen.Store(time.Now().Unix()); conn.Close() }()
	s := &session{enc: json.NewEncoder(conn), lines: bufio.NewScanner(conn)}
	s.lines.Buffer(make([]byte, 1<<20), 64<<20)
	defer func() {
		if s.txn != nil {
			s.txn.close()
		}
	}()
	for s.lines.Scan() {
		var req request
		if err := json.Unmarshal(s.lines.Bytes(), &req); err != nil {
			s.send(map[string]any{"error": err.Error(), "kind": "error"})
			return
		}
		var result any
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			if req.Op == "versions" {
				result = d.versions()
			} else {
				result, err = d.handle(s, &req)
			}
		}()
		if err != nil {
			kind := "error"
			if f, ok := err.(*failure); ok {
				kind = f.kind
			}
			s.send(map[string]any{"error": err.Error(), "kind": kind})
			continue
		}
		if s.send(map[string]any{"result": result}) != nil {
			return
		}
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: compat-go franz|sarama SOCKET WATCH_PID")
		os.Exit(2)
	}
	var d driver
	switch os.Args[1] {
	case "franz":
		d = franzDriver{}
	case "sarama":
		d = saramaDriver{}
	default:
		fmt.Fprintln(os.Stderr, "unknown client", os.Args[1])
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[2] == "versions" {
		json.NewEncoder(os.Stdout).Encode(d.versions())
		return
	}
	watch, _ := strconv.Atoi(os.Args[3])
	os.Remove(os.Args[2])
	ln, err := net.Listen("unix", os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lastSeen.Store(time.Now().Unix())
	go func() {
		for range time.Tick(time.Second) {
			gone := watch > 0 && syscall.Kill(watch, 0) == syscall.ESRCH
			idle := active.Load() == 0 && time.Now().Unix()-lastSeen.Load() > 60
			if gone || idle {
				ln.Close()
				os.Remove(os.Args[2])
				os.Exit(0)
			}
		}
	}()
	fmt.Println("ready")
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(d, conn)
	}
}
