package pybroker.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Apache Kafka's Java client driven by pybroker's compatibility suite over JSON lines.
 *
 * <p>Each request line is an object with an "op" and its arguments; each answer line is
 * {"ok": true, "result": ...} or {"ok": false, "error": "...", "produce_failed": bool}. Bytes
 * travel as base64 strings, null as null. With {@code --serve PORTFILE OWNERPID} it listens on a
 * loopback port (written to PORTFILE) and serves one session per connection, so that every
 * worker process of a matrix run shares this one JVM; it exits when OWNERPID (the matrix run)
 * ends or when nobody has been connected for a while. Without arguments it serves stdin/stdout.
 * A connection's transactional producers and group members are closed when it closes.
 */
public final class JavaClient {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration TIMEOUT = Duration.ofSeconds(20);
    static final AtomicInteger SESSIONS = new AtomicInteger();
    static final AtomicLong LAST_ACTIVE = new AtomicLong(System.currentTimeMillis());
    static final long IDLE_MS = 120_000;

    public static void main(String[] args) throws Exception {
        if (args.length >= 3 && args[0].equals("--serve")) {
            serve(Path.of(args[1]), Long.parseLong(args[2]));
        } else {
            new Session().run(System.in, System.out);
        }
    }

    static void serve(Path portFile, long owner) throws Exception {
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Path tmp = portFile.resolveSibling(portFile.getFileName() + ".tmp");
        Files.writeString(tmp, Integer.toString(server.getLocalPort()));
        Files.move(tmp, portFile, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        Thread watchdog = new Thread(() -> {
            while (true) {
                boolean ownerGone = ProcessHandle.of(owner).map(p -> !p.isAlive()).orElse(true);
                boolean idle = SESSIONS.get() == 0
                        && System.currentTimeMillis() - LAST_ACTIVE.get() > IDLE_MS;
                if (ownerGone || idle) {
                    cleanUp(portFile);
                    Runtime.getRuntime().halt(0);
                }
                sleep(500);
            }
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        while (true) {
            Socket socket = server.accept();
            SESSIONS.incrementAndGet();
            Thread t = new Thread(() -> {
                try (socket) {
                    new Session().run(socket.getInputStream(), socket.getOutputStream());
                } catch (Exception ignored) {
                    // the worker went away (killed at its timeout): its session ends
                } finally {
                    SESSIONS.decrementAndGet();
                    LAST_ACTIVE.set(System.currentTimeMillis());
                }
            }, "session");
            t.setDaemon(true);
            t.start();
        }
    }

    /** The port file and its lock go; the log stays only if something was written to it. */
    static void cleanUp(Path portFile) {
        String stem = portFile.getFileName().toString().replaceFirst("\\.port$", "");
        try {
            Files.deleteIfExists(portFile);
            Files.deleteIfExists(portFile.resolveSibling(stem + ".lock"));
            Path log = portFile.resolveSibling(stem + ".log");
            if (Files.exists(log) && Files.size(log) == 0) {
                Files.delete(log);
            }
        } catch (Exception ignored) {
            // a stale port file is harmless: the next user finds nobody listening
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** One client of the protocol: its open transactional producers and group members. */
    static final class Session {
        final Map<Integer, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
        final Map<Integer, Member> members = new HashMap<>();
        final Map<Integer, Share> shares = new HashMap<>();
        int nextId = 1;

        void run(InputStream in, OutputStream out) throws Exception {
            BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            PrintWriter writer = new PrintWriter(out, true, StandardCharsets.UTF_8);
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    if (line.isBlank()) {
                        continue;
                    }
                    ObjectNode answer = JSON.createObjectNode();
                    try {
                        JsonNode req = JSON.readTree(line);
                        answer.put("ok", true);
                        answer.set("result", handle(req));
                    } catch (Throwable e) {
                        Throwable cause = unwrap(e);
                        answer.removeAll();
                        answer.put("ok", false);
                        answer.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
                        answer.put("produce_failed", e instanceof ProduceFailed);
                        StringWriter trace = new StringWriter();
                        cause.printStackTrace(new PrintWriter(trace));
                        answer.put("trace", trace.toString());
                    }
                    writer.println(JSON.writeValueAsString(answer));
                }
            } finally {
                close();
            }
        }

        void close() {
            for (Member m : members.values()) {
                m.stop();
            }
            for (Share s : shares.values()) {
                s.consumer.close(Duration.ofSeconds(5));
            }
            shares.clear();
            for (KafkaProducer<byte[], byte[]> p : producers.values()) {
                p.close(Duration.ofSeconds(5));
            }
            members.clear();
            producers.clear();
        }

        JsonNode handle(JsonNode req) throws Exception {
            String op = req.get("op").asText();
            String bootstrap = req.path("bootstrap").asText();
            String topic = req.path("topic").asText();
            switch (op) {
                case "versions": {
                    ObjectNode v = JSON.createObjectNode();
                    v.put("kafka-clients", AppInfoParser.getVersion());
                    v.put("java", System.getProperty("java.version"));
                    return v;
                }
                case "produce": {
                    Properties props = producerProps(bootstrap);
                    props.put("compression.type", req.path("codec").asText("none"));
                    props.put("enable.idempotence", Boolean.toString(req.path("idempotent").asBoolean()));
                    req.path("config").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
                    try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props)) {
                        send(p, topic, req.get("recs"));
                    }
                    return null;
                }
                case "txn_init": {
                    Properties props = producerProps(bootstrap);
                    props.put("transactional.id", req.get("transactional_id").asText());
                    KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props);
                    p.initTransactions();
                    int id = nextId++;
                    producers.put(id, p);
                    return JSON.getNodeFactory().numberNode(id);
                }
                case "txn_send": {
                    KafkaProducer<byte[], byte[]> p = producers.get(req.get("id").asInt());
                    p.beginTransaction();
                    send(p, topic, req.get("recs"));
                    return null;
                }
                case "txn_end": {
                    KafkaProducer<byte[], byte[]> p = producers.get(req.get("id").asInt());
                    if (req.get("commit").asBoolean()) {
                        p.commitTransaction();
                    } else {
                        p.abortTransaction();
                    }
                    return null;
                }
                case "txn_close": {
                    KafkaProducer<byte[], byte[]> p = producers.remove(req.get("id").asInt());
                    if (p != null) {
                        p.close(TIMEOUT);
                    }
                    return null;
                }
                case "consume":
                    return consume(req, bootstrap, topic);
                case "offsets_for_times": {
                    Map<TopicPartition, Long> times = new HashMap<>();
                    req.get("times").fields().forEachRemaining(e ->
                            times.put(new TopicPartition(topic, Integer.parseInt(e.getKey())), e.getValue().asLong()));
                    ObjectNode result = JSON.createObjectNode();
                    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
                        for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : c.offsetsForTimes(times, TIMEOUT).entrySet()) {
                            String p = Integer.toString(e.getKey().partition());
                            if (e.getValue() == null) {
                                result.putNull(p);
                            } else {
                                result.putArray(p).add(e.getValue().offset()).add(e.getValue().timestamp());
                            }
                        }
                    }
                    return result;
                }
                case "consume_group":
                    return consumeGroup(bootstrap, topic, req.get("group").asText(), req.get("count").asInt(),
                            req.path("group_protocol").asText("classic"));
                case "share_start": {
                    int id = nextId++;
                    shares.put(id, new Share(bootstrap, req.get("group").asText(), topic));
                    return JSON.getNodeFactory().numberNode(id);
                }
                case "share_poll":
                    return shares.get(req.get("id").asInt()).poll(req.get("timeout_ms").asLong());
                case "share_acknowledge": {
                    Share s = shares.get(req.get("id").asInt());
                    s.consumer.acknowledge(s.polled.get(req.get("index").asInt()),
                            org.apache.kafka.clients.consumer.AcknowledgeType.valueOf(req.get("type").asText()));
                    return null;
                }
                case "share_commit": {
                    ObjectNode result = JSON.createObjectNode();
                    shares.get(req.get("id").asInt()).consumer.commitSync(TIMEOUT).forEach((tip, error) ->
                            result.put(tip.toString(), error.map(e -> e.getClass().getSimpleName() + ": "
                                    + e.getMessage()).orElse(null)));
                    return result;
                }
                case "share_close": {
                    Share s = shares.remove(req.get("id").asInt());
                    if (s != null) {
                        s.consumer.close(TIMEOUT);
                    }
                    return null;
                }
                case "committed": {
                    Properties props = consumerProps(bootstrap);
                    props.put("group.id", req.get("group").asText());
                    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                        Set<TopicPartition> tps = new HashSet<>();
                        for (JsonNode p : req.get("partitions")) {
                            tps.add(new TopicPartition(topic, p.asInt()));
                        }
                        Map<TopicPartition, OffsetAndMetadata> found = c.committed(tps, TIMEOUT);
                        ObjectNode result = JSON.createObjectNode();
                        for (TopicPartition tp : tps) {
                            OffsetAndMetadata om = found.get(tp);
                            result.put(Integer.toString(tp.partition()), om == null ? -1 : om.offset());
                        }
                        return result;
                    }
                }
                case "member_start": {
                    String instance = req.path("instance_id").isTextual() ? req.get("instance_id").asText() : null;
                    List<String> topics = new ArrayList<>();
                    for (JsonNode t : req.path("topics")) {
                        topics.add(t.asText());
                    }
                    if (topics.isEmpty()) {
                        topics.add(topic);
                    }
                    String regex = req.path("regex").isTextual() ? req.get("regex").asText() : null;
                    Member m = new Member(bootstrap, topics, regex, req.get("group").asText(),
                            req.path("cooperative").asBoolean(), instance,
                            req.path("group_protocol").asText("classic"));
                    int id = nextId++;
                    members.put(id, m);
                    return JSON.getNodeFactory().numberNode(id);
                }
                case "member_values": {
                    Member m = members.get(req.get("id").asInt());
                    ObjectNode result = JSON.createObjectNode();
                    result.set("values", m.values());
                    result.put("error", m.error == null ? null : m.error.toString());
                    return result;
                }
                case "member_stop": {
                    Member m = members.remove(req.get("id").asInt());
                    if (m != null) {
                        m.stop();
                        if (m.error != null) {
                            throw new RuntimeException("member failed", m.error);
                        }
                    }
                    return null;
                }
                default:
                    return admin(op, req, bootstrap, topic);
            }
        }
    }

    static final class ProduceFailed extends Exception {
        ProduceFailed(Throwable cause) {
            super(cause);
        }
    }

    static Throwable unwrap(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof ProduceFailed) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("linger.ms", "5");
        props.put("request.timeout.ms", "10000");
        props.put("delivery.timeout.ms", "15000");
        props.put("max.block.ms", "20000");
        return props;
    }

    static Properties consumerProps(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("fetch.max.wait.ms", "100");
        return props;
    }

    static byte[] bytes(JsonNode n) {
        return n == null || n.isNull() ? null : Base64.getDecoder().decode(n.asText());
    }

    static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    /** Sends every record in order, then waits for each acknowledgement. */
    static void send(KafkaProducer<byte[], byte[]> p, String topic, JsonNode recs) throws ProduceFailed {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            for (JsonNode r : recs) {
                List<Header> headers = new ArrayList<>();
                for (JsonNode h : r.path("headers")) {
                    headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
                }
                Integer partition = r.path("partition").isNull() || r.path("partition").isMissingNode()
                        ? null : r.get("partition").asInt();
                Long ts = r.path("timestamp").isNull() || r.path("timestamp").isMissingNode()
                        ? null : r.get("timestamp").asLong();
                sent.add(p.send(new ProducerRecord<>(topic, partition, ts, bytes(r.get("key")),
                        bytes(r.get("value")), headers)));
            }
            p.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            }
        } catch (Exception e) {
            throw new ProduceFailed(e);
        }
    }

    static ObjectNode got(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode g = JSON.createObjectNode();
        g.put("partition", r.partition());
        g.put("offset", r.offset());
        g.put("key", b64(r.key()));
        g.put("value", b64(r.value()));
        g.put("timestamp", r.timestamp());
        ArrayNode headers = g.putArray("headers");
        for (Header h : r.headers()) {
            headers.addArray().add(h.key()).add(b64(h.value()));
        }
        return g;
    }

    /**
     * Assigned partitions (no group) from the beginning, an offset or a timestamp; with
     * "to_end", on past `count` records until the position reaches the end offsets the
     * isolation level allows, reporting the positions.
     */
    static JsonNode consume(JsonNode req, String bootstrap, String topic) {
        Properties props = consumerProps(bootstrap);
        props.put("isolation.level", req.path("isolation").asText("read_uncommitted"));
        int count = req.get("count").asInt();
        boolean toEnd = req.path("to_end").asBoolean();
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode p : req.get("partitions")) {
            tps.add(new TopicPartition(topic, p.asInt()));
        }
        ArrayNode records = JSON.createArrayNode();
        ObjectNode positions = JSON.createObjectNode();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
            c.assign(tps);
            if (req.has("offset")) {
                c.seek(tps.get(0), req.get("offset").asLong());
            } else if (req.has("timestamp")) {
                Map<TopicPartition, OffsetAndTimestamp> found =
                        c.offsetsForTimes(Map.of(tps.get(0), req.get("timestamp").asLong()), TIMEOUT);
                OffsetAndTimestamp at = found.get(tps.get(0));
                if (at == null) {
                    throw new IllegalStateException("offsetsForTimes found no offset");
                }
                c.seek(tps.get(0), at.offset());
            } else {
                c.seekToBeginning(tps);
            }
            long deadline = System.currentTimeMillis() + TIMEOUT.toMillis();
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    records.add(got(r));
                }
            }
            if (toEnd) {
                Map<TopicPartition, Long> end = c.endOffsets(tps, TIMEOUT);
                while (System.currentTimeMillis() < deadline) {
                    boolean atEnd = true;
                    for (TopicPartition tp : tps) {
                        atEnd &= c.position(tp, TIMEOUT) >= end.get(tp);
                    }
                    if (atEnd) {
                        break;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        records.add(got(r));
                    }
                }
                for (TopicPartition tp : tps) {
                    positions.put(Integer.toString(tp.partition()), c.position(tp, TIMEOUT));
                }
            }
        }
        ObjectNode result = JSON.createObjectNode();
        result.set("records", records);
        result.set("positions", positions);
        return result;
    }

    /**
     * A KafkaShareConsumer (KIP-932) in explicit acknowledgement mode, driven call by call as
     * a confluent-kafka ShareConsumer is (poll, acknowledge, commit, close), so that the same
     * share-group scenarios play both clients. The records of the last poll are kept so an
     * acknowledgement can name one by its index in that poll: the client wants the record
     * itself, and in explicit mode every record of a poll must be acknowledged before the next.
     */
    static final class Share {
        final org.apache.kafka.clients.consumer.KafkaShareConsumer<byte[], byte[]> consumer;
        final List<ConsumerRecord<byte[], byte[]>> polled = new ArrayList<>();

        Share(String bootstrap, String group, String topic) {
            Properties props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            props.put("group.id", group);
            props.put("share.acknowledgement.mode", "explicit");
            consumer = new org.apache.kafka.clients.consumer.KafkaShareConsumer<>(props);
            consumer.subscribe(List.of(topic));
        }

        /** Each record as {@link #got} has it, with its delivery count. */
        ArrayNode poll(long timeoutMs) {
            polled.clear();
            ArrayNode out = JSON.createArrayNode();
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) {
                polled.add(r);
                ObjectNode g = got(r);
                g.put("delivery_count", r.deliveryCount().map(Short::intValue).orElse(-1));
                out.add(g);
            }
            return out;
        }
    }

    /** Joins the group, takes exactly `count` records, commits exactly those, leaves. */
    static JsonNode consumeGroup(String bootstrap, String topic, String group, int count,
                                 String groupProtocol) {
        Properties props = consumerProps(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", groupProtocol);
        props.put("max.poll.records", "1");
        ArrayNode records = JSON.createArrayNode();
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + TIMEOUT.toMillis();
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (records.size() < count) {
                        records.add(got(r));
                        commit.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    }
                }
            }
            if (!commit.isEmpty()) {
                c.commitSync(commit, TIMEOUT);
            }
        }
        return records;
    }

    /** A long-lived group member in its own thread, committing each record it takes. */
    static final class Member {
        final List<byte[]> taken = Collections.synchronizedList(new ArrayList<>());
        final Thread thread;
        volatile boolean stopping;
        volatile Throwable error;

        /** With `instanceId`, a static member: closing it does not leave the group. With
         *  `groupProtocol` "consumer", a KIP-848 member: the broker assigns, and the session
         *  and heartbeat are the broker's to set, and a `regex` (instead of `topics`) is a
         *  SubscriptionPattern the broker resolves (RE2/J, as Kafka). */
        Member(String bootstrap, List<String> topics, String regex, String group, boolean cooperative,
               String instanceId, String groupProtocol) {
            Properties props = consumerProps(bootstrap);
            props.put("group.id", group);
            boolean consumerProtocol = groupProtocol.equals("consumer");
            if (consumerProtocol) {
                props.put("group.protocol", "consumer");
            }
            if (cooperative) {
                props.put("partition.assignment.strategy",
                        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            }
            if (instanceId != null) {
                props.put("group.instance.id", instanceId);
            }
            if (!consumerProtocol) {
                props.put("session.timeout.ms", "10000");
                props.put("heartbeat.interval.ms", "500");
            }
            thread = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                    if (regex != null) {
                        c.subscribe(new SubscriptionPattern(regex));
                    } else {
                        c.subscribe(topics);
                    }
                    while (!stopping) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                            taken.add(r.value());
                            try {
                                c.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                        new OffsetAndMetadata(r.offset() + 1)));
                            } catch (KafkaException e) {
                                // rebalancing: the record comes again (at least once)
                            }
                        }
                    }
                } catch (Throwable e) {
                    error = e;
                }
            }, "member of " + group);
            thread.setDaemon(true);
            thread.start();
        }

        ArrayNode values() {
            ArrayNode out = JSON.createArrayNode();
            synchronized (taken) {
                for (byte[] v : taken) {
                    out.add(b64(v));
                }
            }
            return out;
        }

        void stop() {
            stopping = true;
            try {
                thread.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static JsonNode admin(String op, JsonNode req, String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("default.api.timeout.ms", "20000");
        props.put("request.timeout.ms", "10000");
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Admin.create(props)) {
            switch (op) {
                case "create_topic": {
                    Map<String, String> configs = new HashMap<>();
                    req.path("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
                    NewTopic t = new NewTopic(topic, req.get("partitions").asInt(), (short) 1).configs(configs);
                    admin.createTopics(List.of(t)).all().get();
                    return null;
                }
                case "list_topics": {
                    ArrayNode out = JSON.createArrayNode();
                    for (String name : admin.listTopics().names().get()) {
                        out.add(name);
                    }
                    return out;
                }
                case "partition_count":
                    return JSON.getNodeFactory().numberNode(admin.describeTopics(List.of(topic))
                            .allTopicNames().get().get(topic).partitions().size());
                case "add_partitions":
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(req.get("total").asInt())))
                            .all().get();
                    return null;
                case "delete_topic":
                    admin.deleteTopics(List.of(topic)).all().get();
                    return null;
                case "describe_configs": {
                    ObjectNode out = JSON.createObjectNode();
                    Collection<ConfigEntry> entries = admin.describeConfigs(List.of(resource)).all().get()
                            .get(resource).entries();
                    for (ConfigEntry e : entries) {
                        out.put(e.name(), e.value());
                    }
                    return out;
                }
                case "set_config":
                case "delete_config": {
                    AlterConfigOp.OpType type = op.equals("set_config") ? AlterConfigOp.OpType.SET
                            : AlterConfigOp.OpType.DELETE;
                    String value = req.path("value").isMissingNode() ? null : req.get("value").asText();
                    AlterConfigOp alter = new AlterConfigOp(new ConfigEntry(req.get("name").asText(), value), type);
                    admin.incrementalAlterConfigs(Map.of(resource, List.of(alter))).all().get();
                    return null;
                }
                case "list_groups": {
                    ArrayNode out = JSON.createArrayNode();
                    for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                        out.add(g.groupId());
                    }
                    return out;
                }
                case "describe_group": {
                    String group = req.get("group").asText();
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                            .describedGroups().get(group).get();
                    ObjectNode out = JSON.createObjectNode();
                    out.put("state", d.groupState().toString());
                    out.put("assignor", d.partitionAssignor());
                    ArrayNode members = out.putArray("members");
                    for (MemberDescription m : d.members()) {
                        ObjectNode assignment = members.addObject();
                        for (TopicPartition tp : m.assignment().topicPartitions()) {
                            ArrayNode parts = assignment.has(tp.topic()) ? (ArrayNode) assignment.get(tp.topic())
                                    : assignment.putArray(tp.topic());
                            parts.add(tp.partition());
                        }
                    }
                    return out;
                }
                case "alter_group_offsets": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    req.get("offsets").fields().forEachRemaining(e -> offsets.put(
                            new TopicPartition(topic, Integer.parseInt(e.getKey())),
                            new OffsetAndMetadata(e.getValue().asLong())));
                    admin.alterConsumerGroupOffsets(req.get("group").asText(), offsets).all().get();
                    return null;
                }
                case "delete_group":
                    admin.deleteConsumerGroups(List.of(req.get("group").asText())).all().get();
                    return null;
                case "log_dir_sizes": {
                    List<Integer> brokers = new ArrayList<>();
                    for (Node n : admin.describeCluster().nodes().get()) {
                        brokers.add(n.id());
                    }
                    ObjectNode out = JSON.createObjectNode();
                    for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(brokers).allDescriptions().get().values()) {
                        for (LogDirDescription dir : dirs.values()) {
                            for (Map.Entry<TopicPartition, ReplicaInfo> e : dir.replicaInfos().entrySet()) {
                                if (e.getKey().topic().equals(topic)) {
                                    out.put(Integer.toString(e.getKey().partition()), e.getValue().size());
                                }
                            }
                        }
                    }
                    return out;
                }
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        }
    }
}
