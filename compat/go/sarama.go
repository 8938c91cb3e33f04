package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type saramaDriver struct{}

func (saramaDriver) versions() map[string]string { return moduleVersions("github.com/IBM/sarama") }

// saramaVersion is the protocol generation sarama speaks (it picks request versions from it
// rather than from ApiVersions): Kafka 3.6, which pybroker serves.
var saramaVersion = sarama.V3_6_0_0

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = saramaVersion
	c.ClientID = "compat-sarama"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Timeout = readTimeout
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

func addrs(req *request) []string { return strings.Split(req.Bootstrap, ",") }

var saramaCodecs = map[string]sarama.CompressionCodec{
	"": sarama.CompressionNone, "none": sarama.CompressionNone,
	"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

func saramaMessages(topic string, recs []rec) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic}
		if k := decode(r.Key); k != nil {
			m.Key = sarama.ByteEncoder(k)
		}
		if v := decode(r.Value); v != nil {
			m.Value = sarama.ByteEncoder(v)
		}
		if r.Partition != nil {
			m.Partition = *r.Partition
		}
		if r.Timestamp != nil {
			m.Timestamp = time.UnixMilli(*r.Timestamp)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.K), Value: decode(h.V)})
		}
		out[i] = m
	}
	return out
}

func saramaSend(p sarama.SyncProducer, topic string, recs []rec) error {
	if err := p.SendMessages(saramaMessages(topic, recs)); err != nil {
		if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
			return produceFailed(errs[0].Err)
		}
		return produceFailed(err)
	}
	return nil
}

func saramaGot(m *sarama.ConsumerMessage) rec {
	hs := []header{}
	for _, h := range m.Headers {
		hs = append(hs, header{string(h.Key), encode(h.Value)})
	}
	return got(m.Partition, m.Offset, m.Key, m.Value, hs, m.Timestamp)
}

type saramaTxn struct{ p sarama.SyncProducer }

func (t saramaTxn) close() { t.p.Close() }

func (d saramaDriver) handle(s *session, req *request) (any, error) {
	switch req.Op {
	case "produce":
		c := saramaConfig()
		codec, ok := saramaCodecs[req.Codec]
		if !ok {
			return nil, fmt.Errorf("unknown codec %q", req.Codec)
		}
		c.Producer.Compression = codec
		if anyPartition(req.Recs) {
			c.Producer.Partitioner = sarama.NewManualPartitioner
		} else {
			// The default NewHashPartitioner takes abs() of a signed FNV-1a hash, which puts
			// key-000..key-399 on only 67 of 100 partitions; compat/clients/sarama.py notes it.
			c.Producer.Partitioner = sarama.NewReferenceHashPartitioner
		}
		if req.Idempotent {
			c.Producer.Idempotent = true
			c.Net.MaxOpenRequests = 1
		}
		for k, v := range req.Config {
			switch {
			case k == "acks" && v == "1":
				c.Producer.RequiredAcks = sarama.WaitForLocal
			case k == "acks" && v == "0":
				c.Producer.RequiredAcks = sarama.NoResponse
			case k == "acks" && v == "all":
			default:
				return nil, fmt.Errorf("unsupported setting %s=%s", k, v)
			}
		}
		p, err := sarama.NewSyncProducer(addrs(req), c)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		return nil, saramaSend(p, req.Topic, req.Recs)
	case "txn_begin":
		if s.txn == nil {
			c := saramaConfig()
			c.Producer.Idempotent = true
			c.Producer.Transaction.ID = req.TransactionalID
			c.Producer.Partitioner = sarama.NewManualPartitioner
			c.Net.MaxOpenRequests = 1
			p, err := sarama.NewSyncProducer(addrs(req), c)
			if err != nil {
				return nil, err
			}
			s.txn = saramaTxn{p}
		}
		return nil, s.txn.(saramaTxn).p.BeginTxn()
	case "txn_produce":
		return nil, saramaSend(s.txn.(saramaTxn).p, req.Topic, req.Recs)
	case "txn_end":
		if req.Commit {
			return nil, s.txn.(saramaTxn).p.CommitTxn()
		}
		return nil, s.txn.(saramaTxn).p.AbortTxn()
	case "consume":
		return saramaConsume(req)
	case "consume_group":
		return saramaConsumeGroup(req)
	case "member":
		return nil, saramaMember(s, req)
	}
	return saramaAdmin(req)
}

// saramaConsume reads assigned partitions. Sarama exposes no consumer position: to the end,
// the position reported is the high watermark its last fetch carried, once nothing more comes.
func saramaConsume(req *request) (any, error) {
	c := saramaConfig()
	if req.Isolation == "read_committed" {
		c.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	client, err := sarama.NewClient(addrs(req), c)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	messages := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(req.Partitions))
	pcs := map[int32]sarama.PartitionConsumer{}
	done := make(chan struct{})
	// Closed side by side: each Close waits for a fetch round, 100 in turn took 25 s.
	defer func() {
		close(done)
		var wg sync.WaitGroup
		for _, pc := range pcs {
			wg.Add(1)
			go func() { defer wg.Done(); pc.Close() }()
		}
		wg.Wait()
	}()
	for _, p := range req.Partitions {
		start := sarama.OffsetOldest
		switch req.Start {
		case "offset":
			start = req.At
		case "timestamp":
			if start, err = client.GetOffset(req.Topic, p, req.At); err != nil {
				return nil, err
			}
		}
		pc, err := consumer.ConsumePartition(req.Topic, p, start)
		if err != nil {
			return nil, err
		}
		pcs[p] = pc
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case messages <- m:
					case <-done:
						return
					}
				case e, ok := <-pc.Errors():
					if ok {
						errs <- e
					}
				case <-done:
					return
				}
			}
		}()
	}
	records := []rec{}
	deadline := time.After(readTimeout)
	quiet := time.Duration(0) // to the end: wait this long for nothing more after the count
	for {
		var settle <-chan time.Time
		if len(records) >= req.Count {
			if !req.ToEnd {
				break
			}
			if quiet == 0 {
				quiet = 500 * time.Millisecond
			}
			settle = time.After(quiet)
		}
		select {
		case m := <-messages:
			records = append(records, saramaGot(m))
			continue
		case e := <-errs:
			return nil, e
		case <-deadline:
		case <-settle:
		}
		break
	}
	positions := map[int32]int64{}
	if req.ToEnd {
		for p, pc := range pcs {
			positions[p] = pc.HighWaterMarkOffset()
		}
	}
	return map[string]any{"records": records, "positions": positions}, nil
}

// groupHandler takes up to limit records across its claims (limit < 0: no limit), marking
// each; done is closed when the limit is reached (after a synchronous commit).
type groupHandler struct {
	mu    sync.Mutex
	taken []*sarama.ConsumerMessage
	limit int
	take  func(*sarama.ConsumerMessage)
	done  chan struct{}
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		if h.limit >= 0 && len(h.taken) >= h.limit {
			h.mu.Unlock()
			continue
		}
		h.taken = append(h.taken, m)
		if h.take != nil {
			h.take(m)
		}
		s.MarkMessage(m, "")
		if h.limit >= 0 && len(h.taken) == h.limit {
			s.Commit()
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func runGroup(req *request, c *sarama.Config, h *groupHandler) (func(), error) {
	group, err := sarama.NewConsumerGroup(addrs(req), req.Group, c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{req.Topic}, h); err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return func() { cancel(); <-finished; group.Close() }, nil
}

func saramaConsumeGroup(req *request) (any, error) {
	c := saramaConfig()
	c.Consumer.Offsets.AutoCommit.Enable = false
	h := &groupHandler{limit: req.Count, done: make(chan struct{})}
	stop, err := runGroup(req, c, h)
	if err != nil {
		return nil, err
	}
	select {
	case <-h.done:
	case <-time.After(readTimeout):
	}
	stop()
	out := []rec{}
	for _, m := range h.taken {
		out = append(out, saramaGot(m))
	}
	return out, nil
}

func saramaMember(s *session, req *request) error {
	c := saramaConfig()
	c.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	if req.Cooperative {
		// Alone in the list: Java's cooperative-sticky assignor, and the cooperative protocol
		// (sarama picks it when every strategy it offers is cooperative).
		c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{
			sarama.NewBalanceStrategyCooperativeSticky()}
	}
	if req.InstanceID != nil {
		// Close then does not leave the group (KIP-345: sarama only forgets its member id).
		c.Consumer.Group.InstanceId = *req.InstanceID
	}
	h := &groupHandler{limit: -1, take: func(m *sarama.ConsumerMessage) {
		s.send(map[string]any{"value": encode(m.Value)})
	}}
	stop, err := runGroup(req, c, h)
	if err != nil {
		return err
	}
	s.send(map[string]any{"started": true})
	s.lines.Scan()
	stop() // Close commits what was marked and leaves the group
	return nil
}

func saramaAdmin(req *request) (any, error) {
	adm, err := sarama.NewClusterAdmin(addrs(req), saramaConfig())
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	topic := sarama.ConfigResource{Type: sarama.TopicResource, Name: req.Topic}
	switch req.Op {
	case "create_topic":
		configs := map[string]*string{}
		for k, v := range req.Configs {
			configs[k] = &v
		}
		return nil, adm.CreateTopic(req.Topic, &sarama.TopicDetail{NumPartitions: int32(req.Total),
			ReplicationFactor: -1, ConfigEntries: configs}, false)
	case "list_topics":
		topics, err := adm.ListTopics()
		names := []string{}
		for name := range topics {
			names = append(names, name)
		}
		return names, err
	case "partition_count":
		md, err := adm.DescribeTopics([]string{req.Topic})
		if err != nil {
			return nil, err
		}
		if len(md) != 1 || md[0].Err != sarama.ErrNoError {
			return nil, fmt.Errorf("topic not described: %v", md)
		}
		return len(md[0].Partitions), nil
	case "add_partitions":
		return nil, adm.CreatePartitions(req.Topic, int32(req.Total), nil, false)
	case "delete_topic":
		return nil, adm.DeleteTopic(req.Topic)
	case "describe_configs":
		entries, err := adm.DescribeConfig(topic)
		out := map[string]string{}
		for _, e := range entries {
			out[e.Name] = e.Value
		}
		return out, err
	case "set_config":
		return nil, adm.IncrementalAlterConfig(sarama.TopicResource, req.Topic,
			map[string]sarama.IncrementalAlterConfigsEntry{req.Name: {
				Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &req.Value}}, false)
	case "delete_config":
		return nil, adm.IncrementalAlterConfig(sarama.TopicResource, req.Topic,
			map[string]sarama.IncrementalAlterConfigsEntry{req.Name: {
				Operation: sarama.IncrementalAlterConfigsOperationDelete}}, false)
	case "committed":
		resp, err := adm.ListConsumerGroupOffsets(req.Group, map[string][]int32{req.Topic: req.Partitions})
		if err != nil {
			return nil, err
		}
		out := map[int32]int64{}
		for _, p := range req.Partitions {
			out[p] = -1
			if b := resp.GetBlock(req.Topic, p); b != nil && b.Err == sarama.ErrNoError {
				out[p] = b.Offset
			}
		}
		return out, nil
	case "offsets_for_times":
		times, err := byPartition(req.Times)
		if err != nil {
			return nil, err
		}
		listed, err := adm.ListOffsets(map[string]map[int32]int64{req.Topic: times}, nil)
		if err != nil {
			return nil, err
		}
		out := map[int32]any{}
		for p := range times {
			o := listed[req.Topic][p]
			switch {
			case o == nil:
				return nil, fmt.Errorf("partition %d of %s not listed", p, req.Topic)
			case o.Err != nil && o.Err != sarama.ErrNoError:
				return nil, o.Err
			case o.Offset < 0: // no record at or after the time
				out[p] = nil
			default:
				out[p] = []int64{o.Offset, o.Timestamp}
			}
		}
		return out, nil
	case "list_groups":
		groups, err := adm.ListConsumerGroups()
		names := []string{}
		for name := range groups {
			names = append(names, name)
		}
		return names, err
	case "describe_group":
		described, err := adm.DescribeConsumerGroups([]string{req.Group})
		if err != nil {
			return nil, err
		}
		if len(described) != 1 || described[0].GroupId != req.Group {
			return nil, fmt.Errorf("group %s not described: %v", req.Group, described)
		}
		dg := described[0]
		if dg.Err != sarama.ErrNoError {
			return nil, dg.Err
		}
		view := groupView{State: dg.State, Assignor: dg.Protocol, Members: []map[string][]int32{}}
		for _, m := range dg.Members {
			a, err := m.GetMemberAssignment()
			if err != nil {
				return nil, err
			}
			assigned := map[string][]int32{}
			if a != nil {
				for t, ps := range a.Topics {
					assigned[t] = ps
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
		commit := map[int32]sarama.OffsetAndMetadata{}
		for p, at := range offsets {
			commit[p] = sarama.OffsetAndMetadata{Offset: at, LeaderEpoch: -1}
		}
		resp, err := adm.AlterConsumerGroupOffsets(req.Group,
			map[string]map[int32]sarama.OffsetAndMetadata{req.Topic: commit}, nil)
		if err != nil {
			return nil, err
		}
		for p, kerr := range resp.Errors[req.Topic] {
			if kerr != sarama.ErrNoError {
				return nil, fmt.Errorf("partition %d: %w", p, kerr)
			}
		}
		return nil, nil
	case "delete_group":
		return nil, adm.DeleteConsumerGroup(req.Group)
	case "log_dir_sizes":
		brokers, _, err := adm.DescribeCluster()
		if err != nil {
			return nil, err
		}
		ids := []int32{}
		for _, b := range brokers {
			ids = append(ids, b.ID())
		}
		dirs, err := adm.DescribeLogDirs(ids)
		if err != nil {
			return nil, err
		}
		sizes := map[int32]int64{}
		for broker, ds := range dirs {
			for _, d := range ds {
				if d.ErrorCode != sarama.ErrNoError {
					return nil, fmt.Errorf("log dir %s of broker %d: %w", d.Path, broker, d.ErrorCode)
				}
				for _, t := range d.Topics {
					if t.Topic != req.Topic {
						continue
					}
					for _, p := range t.Partitions {
						sizes[p.PartitionID] = p.Size
					}
				}
			}
		}
		return sizes, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}
