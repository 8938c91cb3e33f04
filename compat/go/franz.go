package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type franzDriver struct{}

func (franzDriver) versions() map[string]string {
	return moduleVersions("github.com/twmb/franz-go", "github.com/twmb/franz-go/pkg/kadm")
}

func franzClient(req *request, opts ...kgo.Opt) (*kgo.Client, error) {
	// No kgo.RecordDeliveryTimeout: franz-go counts it from a record's own timestamp, so a
	// record stamped in the past would time out at once; the request's context bounds it.
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(req.Bootstrap, ",")...)}
	if os.Getenv("COMPAT_GO_LOG") != "" { // kgo's own log to the helper's stderr (its .log)
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return kgo.NewClient(append(base, opts...)...)
}

func franzCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func franzRecords(topic string, recs []rec) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: decode(r.Key), Value: decode(r.Value)}
		if r.Partition != nil {
			kr.Partition = *r.Partition
		}
		if r.Timestamp != nil {
			kr.Timestamp = time.UnixMilli(*r.Timestamp)
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.K, Value: decode(h.V)})
		}
		out[i] = kr
	}
	return out
}

func franzGot(r *kgo.Record) rec {
	hs := []header{}
	for _, h := range r.Headers {
		hs = append(hs, header{h.Key, encode(h.Value)})
	}
	return got(r.Partition, r.Offset, r.Key, r.Value, hs, r.Timestamp)
}

func anyPartition(recs []rec) bool {
	for _, r := range recs {
		if r.Partition != nil {
			return true
		}
	}
	return false
}

func franzProducerOpts(req *request) ([]kgo.Opt, error) {
	codec, err := franzCodec(req.Codec)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.ProducerBatchCompression(codec)}
	if anyPartition(req.Recs) {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if !req.Idempotent {
		// franz-go is idempotent by default; a plain producer is what the scenario asks for.
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	for k, v := range req.Config {
		switch {
		case k == "acks" && v == "all":
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		case k == "acks" && v == "1":
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		case k == "acks" && v == "0":
			opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		default:
			return nil, fmt.Errorf("unsupported setting %s=%s", k, v)
		}
	}
	return opts, nil
}

func franzProduce(ctx context.Context, cl *kgo.Client, topic string, recs []rec) error {
	for _, res := range cl.ProduceSync(ctx, franzRecords(topic, recs)...) {
		if res.Err != nil {
			return produceFailed(res.Err)
		}
	}
	return nil
}

type franzTxn struct{ cl *kgo.Client }

func (t franzTxn) close() { t.cl.Close() }

func (d franzDriver) handle(s *session, req *request) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout+10*time.Second)
	defer cancel()
	switch req.Op {
	case "produce":
		opts, err := franzProducerOpts(req)
		if err != nil {
			return nil, err
		}
		cl, err := franzClient(req, opts...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return nil, franzProduce(ctx, cl, req.Topic, req.Recs)
	case "txn_begin":
		if s.txn == nil {
			cl, err := franzClient(req, kgo.TransactionalID(req.TransactionalID),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				return nil, err
			}
			s.txn = franzTxn{cl}
		}
		return nil, s.txn.(franzTxn).cl.BeginTransaction()
	case "txn_produce":
		return nil, franzProduce(ctx, s.txn.(franzTxn).cl, req.Topic, req.Recs)
	case "txn_end":
		cl := s.txn.(franzTxn).cl
		if err := cl.Flush(ctx); err != nil {
			return nil, err
		}
		return nil, cl.EndTransaction(ctx, kgo.TransactionEndTry(req.Commit))
	case "consume":
		return franzConsume(req)
	case "consume_group":
		return franzConsumeGroup(req)
	case "member":
		return nil, franzMember(s, req)
	}
	return franzAdmin(ctx, req)
}

// franzConsume reads assigned partitions; to the end, it keeps the control records to follow
// the client's own position past transaction markers.
func franzConsume(req *request) (any, error) {
	start := kgo.NewOffset().AtStart()
	switch req.Start {
	case "offset":
		start = kgo.NewOffset().At(req.At)
	case "timestamp":
		start = kgo.NewOffset().AfterMilli(req.At)
	}
	assign := map[int32]kgo.Offset{}
	for _, p := range req.Partitions {
		assign[p] = start
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{req.Topic: assign})}
	if req.Isolation == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if req.ToEnd {
		opts = append(opts, kgo.KeepControlRecords())
	}
	cl, err := franzClient(req, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	records := []rec{}
	position := map[int32]int64{}
	var ends map[int32]int64
	deadline := time.Now().Add(readTimeout)
	for time.Now().Before(deadline) {
		if len(records) >= req.Count {
			if !req.ToEnd {
				break
			}
			if ends == nil {
				listed, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), req.Topic)
				if err != nil {
					return nil, err
				}
				ends = map[int32]int64{}
				listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
				deadline = time.Now().Add(5 * time.Second)
			}
			done := true
			for _, p := range req.Partitions {
				done = done && position[p] >= ends[p]
			}
			if done {
				break
			}
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		fetches := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return nil, fe.Err
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			position[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				records = append(records, franzGot(r))
			}
		})
	}
	return map[string]any{"records": records, "positions": position}, nil
}

// franzGroupProtocol chooses how a group member joins: "consumer" is KIP-848, which kgo runs
// only with kgo.ServerSideBalancer and a first balancer of sticky (asking the broker's
// "uniform" assignor) or range ("range"); anything else falls back to the classic protocol
// silently, so the balancer is set here with the opt-in.
func franzGroupProtocol(req *request) ([]kgo.Opt, error) {
	switch req.GroupProtocol {
	case "", "classic":
		return nil, nil
	case "consumer":
		return []kgo.Opt{kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.CooperativeStickyBalancer())}, nil
	}
	return nil, fmt.Errorf("unknown group protocol %q", req.GroupProtocol)
}

func franzConsumeGroup(req *request) (any, error) {
	protocol, err := franzGroupProtocol(req)
	if err != nil {
		return nil, err
	}
	cl, err := franzClient(req, append([]kgo.Opt{kgo.ConsumerGroup(req.Group),
		kgo.ConsumeTopics(req.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit()}, protocol...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var taken []*kgo.Record
	for len(taken) < req.Count && ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, req.Count-len(taken))
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return nil, fe.Err
			}
		}
		taken = append(taken, fetches.Records()...)
	}
	if err := cl.CommitRecords(context.Background(), taken...); err != nil {
		return nil, err
	}
	out := []rec{}
	for _, r := range taken {
		out = append(out, franzGot(r))
	}
	return out, nil
}

// franzMember streams what a committing group member takes until the Python side says stop.
// Each taken value goes back with its topic and partition, so that a scenario can tell which
// member read which partition.
func franzMember(s *session, req *request) error {
	opts := []kgo.Opt{kgo.ConsumerGroup(req.Group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond), kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond)}
	switch {
	case req.Regex != "":
		// With no excluded topics kgo sends the regex itself (SubscribedTopicRegex) under
		// KIP-848: the broker resolves it.
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics(req.Regex))
	case len(req.Topics) > 0:
		opts = append(opts, kgo.ConsumeTopics(req.Topics...))
	default:
		opts = append(opts, kgo.ConsumeTopics(req.Topic))
	}
	protocol, err := franzGroupProtocol(req)
	if err != nil {
		return err
	}
	switch {
	case protocol != nil:
		// KIP-848: the broker assigns; session and heartbeat intervals are the broker's
		// (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms).
		opts = append(opts, protocol...)
	case req.Cooperative:
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	case req.InstanceID != nil:
		// Range, Java's default first choice, not kgo's default cooperative-sticky: a
		// restarted static leader balances the group itself and, when a fresh balance differs
		// from the assignment it is handed back, rejoins to force a rebalance (kgo's KIP-814
		// workaround); Apache Kafka 4.1.1 shows the same. compat/clients/franz_go.py notes it.
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	}
	if req.InstanceID != nil {
		// kgo's Close does not leave the group for a static member (KIP-345).
		opts = append(opts, kgo.InstanceID(*req.InstanceID))
	}
	cl, err := franzClient(req, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			fetches.EachRecord(func(r *kgo.Record) {
				s.send(map[string]any{"value": encode(r.Value), "topic": r.Topic,
					"partition": r.Partition})
			})
		}
	}()
	s.send(map[string]any{"started": true})
	s.lines.Scan() // "stop", or the connection closing
	cancel()
	wg.Wait()
	cl.Close() // commits what was polled and leaves the group
	return nil
}

func franzAdmin(ctx context.Context, req *request) (any, error) {
	cl, err := franzClient(req)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	switch req.Op {
	case "create_topic":
		configs := map[string]*string{}
		for k, v := range req.Configs {
			configs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(req.Total), -1, configs, req.Topic)
		if err == nil {
			err = resp.Err
		}
		return nil, err
	case "list_topics":
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		return topics.Names(), nil
	case "partition_count":
		topics, err := adm.ListTopics(ctx, req.Topic)
		if err != nil {
			return nil, err
		}
		td, ok := topics[req.Topic]
		if !ok || td.Err != nil {
			return nil, fmt.Errorf("topic not described: %v", td.Err)
		}
		return len(td.Partitions), nil
	case "add_partitions":
		resp, err := adm.UpdatePartitions(ctx, req.Total, req.Topic)
		if err == nil {
			err = resp.Error()
		}
		return nil, err
	case "delete_topic":
		resp, err := adm.DeleteTopics(ctx, req.Topic)
		if err == nil {
			err = resp.Error()
		}
		return nil, err
	case "describe_configs":
		rcs, err := adm.DescribeTopicConfigs(ctx, req.Topic)
		if err != nil {
			return nil, err
		}
		rc, err := rcs.On(req.Topic, nil)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, c := range rc.Configs {
			out[c.Key] = c.MaybeValue()
		}
		return out, nil
	case "set_config", "delete_config":
		op := kadm.AlterConfig{Op: kadm.SetConfig, Name: req.Name, Value: &req.Value}
		if req.Op == "delete_config" {
			op = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: req.Name}
		}
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{op}, req.Topic)
		if err == nil {
			_, err = resp.On(req.Topic, nil)
		}
		return nil, err
	case "committed":
		resp, err := adm.FetchOffsets(ctx, req.Group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return nil, err
		}
		out := map[int32]int64{}
		for _, p := range req.Partitions {
			out[p] = -1
			if o, ok := resp.Lookup(req.Topic, p); ok {
				out[p] = o.At
			}
		}
		return out, nil
	case "offsets_for_times":
		return franzOffsetsForTimes(ctx, adm, req)
	case "list_groups":
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		return groups.Groups(), nil
	case "describe_group":
		described, err := adm.DescribeGroups(ctx, req.Group)
		if err != nil {
			return nil, err
		}
		dg, ok := described[req.Group]
		if !ok {
			return nil, fmt.Errorf("group %s not described", req.Group)
		}
		if dg.Err != nil {
			return nil, dg.Err
		}
		view := groupView{State: dg.State, Assignor: dg.Protocol, Members: []map[string][]int32{}}
		for _, m := range dg.Members {
			assigned := map[string][]int32{}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
				}
			}
			view.Members = append(view.Members, assigned)
		}
		return view, nil
	case "alter_group_offsets":
		offsets, err := byPartition(req.Offsets)
		if err != nil {
			return nil, err
		}
		var os kadm.Offsets
		for p, at := range offsets {
			os.AddOffset(req.Topic, p, at, -1)
		}
		return nil, adm.CommitAllOffsets(ctx, req.Group, os)
	case "delete_group":
		resp, err := adm.DeleteGroup(ctx, req.Group)
		if err == nil {
			err = resp.Err
		}
		return nil, err
	case "log_dir_sizes":
		// nil: every log dir of every broker, as Admin.describeLogDirs(all brokers) asks.
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			return nil, err
		}
		sizes := map[int32]int64{}
		var dirErr error
		dirs.Each(func(d kadm.DescribedLogDir) {
			if d.Err != nil {
				dirErr = fmt.Errorf("log dir %s of broker %d: %w", d.Dir, d.Broker, d.Err)
			}
			for p, dp := range d.Topics[req.Topic] {
				sizes[p] = dp.Size
			}
		})
		return sizes, dirErr
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

// franzOffsetsForTimes asks kadm's ListOffsetsAfterMilli per timestamp. Where no record is at
// or after it, kadm answers with the partition's end offset (its documented fallback), which
// this reports as none (null), as Java's offsetsForTimes does.
func franzOffsetsForTimes(ctx context.Context, adm *kadm.Client, req *request) (any, error) {
	times, err := byPartition(req.Times)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, req.Topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]any{}
	for p, ms := range times {
		listed, err := adm.ListOffsetsAfterMilli(ctx, ms, req.Topic)
		if err != nil {
			return nil, err
		}
		o, ok := listed.Lookup(req.Topic, p)
		end, endOK := ends.Lookup(req.Topic, p)
		switch {
		case !ok || !endOK:
			return nil, fmt.Errorf("partition %d of %s not listed", p, req.Topic)
		case o.Err != nil:
			return nil, o.Err
		case end.Err != nil:
			return nil, end.Err
		case o.Offset >= end.Offset:
			out[p] = nil
		default:
			out[p] = []int64{o.Offset, o.Timestamp}
		}
	}
	return out, nil
}
