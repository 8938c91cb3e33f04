"""The broker key table: every `server.properties` key this broker knows, declared once.

One module on purpose (about 570 lines): a declaration table, one entry per key.

`BROKER_CONFIG_KEYS` is the one table of keys. Names, types, defaults and validators are
Kafka's (3.x, the last line with ZooKeeper mode) unless the doc says otherwise; the doc strings
are ours. A few keys are accepted only so that Kafka's own configuration files load without
noise (thread counts, KRaft controller settings); their docs say so. Beside it are the synonym
tables (which broker keys supply a topic's default, which broker keys stand for one another).

Defaults that differ from Kafka's, on purpose:
- `node.id` / `broker.id` default to 0, not "must be set", so a broker starts with no file.
- `listeners` defaults to `PLAINTEXT://127.0.0.1:9092` rather than all interfaces, so a broker
  started for a test or a laptop is not reachable from the network.
- `ssl.keystore.type` and `ssl.truststore.type` default to PEM, not JKS: pybroker reads PEM
  only (Python's ssl module has no Java key stores).

No known key is a silent promise: each is honoured, inert until a named feature lands (setting
it is reported at start), not applicable, or deprecated (honoured, and reported at start), with
the reason in its doc (`KeyState`; the table
in docs/CONFIG.md is generated from this one). The table is data only, kept apart from
`broker.BrokerConfig` (parsing, precedence, cross-key rules) so each reads on its own.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from pybroker.config.definitions import (
    INT32_MAX, INT64_MAX, ConfigKey, ConfigType, CountOrAll, Importance, KeyState, KnownClass,
    ListOf, NonEmptyUniqueList, OneOf, OneOfIgnoringCase, Validator, at_least, between,
)

_B, _S, _I, _SH, _L, _D, _LS, _P = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.PASSWORD)
_HIGH: Importance = "high"
_MEDIUM: Importance = "medium"
_LOW: Importance = "low"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
_HOUR_MS = 60 * 60 * 1000
_MINUTE_MS = 60 * 1000


def _k(name: str, type_: ConfigType, default: object, validator: Validator | None,
       importance: Importance, doc: str, *, inert: str | None = None, na: bool = False,
       deprecated: bool = False, refused: tuple[object, ...] = (),
       sensitive: bool = False) -> ConfigKey:
    """One row of the table; `inert` names the feature an unbuilt key waits for, `na` marks a
    Kafka internal pybroker has no counterpart for, `deprecated` an older name (see KeyState);
    a `sensitive` value (a password, a private key) is never shown: not in DescribeConfigs,
    not in logs."""
    state = (KeyState.INERT if inert else KeyState.NOT_APPLICABLE if na
             else KeyState.DEPRECATED if deprecated else KeyState.HONOURED)
    return ConfigKey(name, type_, default, validator, importance, doc, state=state,
                     feature=inert, refused_values=refused, sensitive=sensitive)


BROKER_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # --- identity and cluster -------------------------------------------------------------------
    _k("node.id", _I, 0, at_least(0), _HIGH,
       "This broker's id in the cluster. Same setting as broker.id (either name works; if both "
       "are given they must agree). pybroker defaults to 0; Kafka requires it."),
    _k("broker.id", _I, 0, at_least(0), _HIGH,
       "The ZooKeeper-era name of node.id, kept so older configuration files work."),
    _k("process.roles", _LS, (), ListOf(("broker", "controller"), unique=True), _HIGH,
       "KRaft roles of this node. Accepted so Kafka's files load; pybroker is always a broker "
       "and never runs a KRaft controller.", na=True),
    _k("cluster.id", _S, None, None, _LOW,
       "The cluster id to use when the log dir's meta.properties has none (instead of a "
       "generated one). An id that differs from the one in meta.properties is refused at "
       "start, as Kafka refuses a broker joining the wrong cluster."),
    _k("broker.rack", _S, None, None, _MEDIUM,
       "Rack or zone label of this broker, registered in ZooKeeper and reported to clients "
       "(Metadata, DescribeCluster); with replica.selector.class set, consumers whose "
       "client.rack matches it read from this broker's replicas (KIP-392)."),
    _k("zookeeper.connect", _S, None, None, _HIGH,
       "ZooKeeper connection string, host:port[,host:port...][/chroot]. Set: this broker is a "
       "member of the cluster coordinated there (replication, leader failover). Unset: a "
       "single broker keeps its metadata in local files. unix:<socket path>: the metadata "
       "service of this broker's node (the brokers of one machine, num.cores > 1), with "
       "ZooKeeper's semantics and no ZooKeeper."),
    _k("zookeeper.connection.timeout.ms", _I, None, None, _HIGH,
       "How long to wait for ZooKeeper at start. Unset: zookeeper.session.timeout.ms."),
    _k("zookeeper.session.timeout.ms", _I, 18000, None, _HIGH,
       "ZooKeeper session timeout: a broker silent this long loses its registration."),
    _k("controller.quorum.voters", _LS, (), None, _HIGH,
       "KRaft controller voters. Accepted for compatibility; unused.", na=True),
    _k("controller.quorum.bootstrap.servers", _LS, (), None, _HIGH,
       "KRaft controller bootstrap addresses. Accepted for compatibility; unused.", na=True),
    _k("controller.listener.names", _S, None, None, _HIGH,
       "Listener names used by KRaft controllers. pybroker leaves them out of the addresses it "
       "advertises to clients."),
    # --- network --------------------------------------------------------------------------------
    _k("listeners", _LS, ("PLAINTEXT://127.0.0.1:9092",), NonEmptyUniqueList(), _HIGH,
       "Where to accept connections: comma-separated NAME://host:port. An empty host binds all "
       "interfaces and port 0 picks a free port. pybroker defaults to 127.0.0.1 (Kafka binds "
       "all interfaces) so a new broker is not exposed to the network. PLAINTEXT and SSL "
       "listeners are served; SASL listeners are refused at start."),
    _k("advertised.listeners", _LS, None, NonEmptyUniqueList(), _HIGH,
       "Addresses handed to clients in Metadata when they differ from the bound ones (NAT, "
       "containers). Unset: listeners. 0.0.0.0 is refused: no client can connect to it."),
    # Kafka 0.8's listener keys, deprecated in 0.10 and removed in 3.0; older files carry them.
    _k("port", _I, 9092, between(0, 65535), _HIGH,
       "Deprecated (Kafka 0.8; removed in Kafka 3.0): the port of the one listener. When "
       "listeners is unset, port and host.name make it PLAINTEXT://host.name:port; when it "
       "is set they are ignored. Either way setting it logs a one-line warning naming "
       "listeners (and, when listeners wins, its value).", deprecated=True),
    _k("host.name", _S, "127.0.0.1", None, _HIGH,
       "Deprecated (Kafka 0.8; removed in Kafka 3.0): the host of the one listener, with port "
       "(see port). pybroker's default is 127.0.0.1, as for listeners; Kafka's was empty "
       "(every interface), which host.name= (empty) still gives.", deprecated=True),
    _k("advertised.host.name", _S, None, None, _HIGH,
       "Deprecated (Kafka 0.8; removed in Kafka 3.0): the host advertised for the PLAINTEXT "
       "listener when advertised.listeners is unset (ignored when it is set). Setting it logs "
       "a one-line warning naming advertised.listeners.", deprecated=True),
    _k("advertised.port", _I, None, between(0, 65535), _HIGH,
       "Deprecated (Kafka 0.8; removed in Kafka 3.0): the port advertised for the PLAINTEXT "
       "listener, as advertised.host.name.", deprecated=True),
    _k("listener.security.protocol.map", _S,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, _LOW,
       "Security protocol of each listener name, as NAME:PROTOCOL pairs."),
    _k("inter.broker.listener.name", _S, None, None, _MEDIUM,
       "Listener brokers use to reach each other (followers fetching, transaction markers), "
       "with its security protocol; must be an advertised listener. Only one of this and "
       "security.inter.broker.protocol may be set."),
    _k("security.inter.broker.protocol", _S, "PLAINTEXT", OneOf(SECURITY_PROTOCOLS), _MEDIUM,
       "Protocol brokers use to reach each other, when inter.broker.listener.name is unset: "
       "the listener of that name, which must be advertised (also at the default: a broker "
       "without a PLAINTEXT listener sets this or inter.broker.listener.name, or does not "
       "start, as Kafka)."),
    _k("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", None, _MEDIUM,
       "SASL mechanism brokers log in with on a SASL inter-broker listener; it must be enabled "
       "there (Kafka's default GSSAPI is not served, so set it). The credentials are the "
       "username/password options of that listener's JAAS line for the mechanism "
       "(listener.name.<l>.<mechanism>.sasl.jaas.config, then sasl.jaas.config); for "
       "OAUTHBEARER, its unsecuredLoginStringClaim_sub. With ACLs on, put the broker's "
       "principal in super.users."),
    _k("authorizer.class.name", _S, "",
       OneOf(("", "kafka.security.authorizer.AclAuthorizer",
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer")), _LOW,
       "The authorizer: empty for none (every request allowed; the ACL APIs answer "
       "SECURITY_DISABLED), or one of Kafka's ACL authorizer class names, which turn ACLs on "
       "(both name the same authorizer here). Any other class is refused at start."),
    _k("super.users", _S, None, None, _LOW,
       "Principals allowed everything whatever the ACLs say, separated by semicolons "
       "(User:admin;User:alice)."),
    _k("allow.everyone.if.no.acl.found", _B, False, None, _LOW,
       "With an authorizer: whether a resource no ACL applies to is open to everyone."),
    # --- SASL (pybroker/security/sasl; listener.name.<l>. prefixes as in pybroker/config/sasl.py)
    _k("sasl.enabled.mechanisms", _LS, ("GSSAPI",), None, _MEDIUM,
       "Mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER "
       "(unsecured JWS tokens). Kafka's default GSSAPI (Kerberos) is not served: a SASL "
       "listener left with it is refused at start. listener.name.<l>.sasl.enabled.mechanisms "
       "overrides it per listener."),
    _k("sasl.jaas.config", _P, None, None, _MEDIUM,
       "A JAAS login module line, as Kafka's. Read for PLAIN's users (user_<name>=\"password\" "
       "options of PlainLoginModule) and OAUTHBEARER's unsecuredValidator* options; "
       "listener.name.<l>.<mechanism>.sasl.jaas.config overrides it per listener and "
       "mechanism. Never shown by DescribeConfigs.", sensitive=True),
    _k("sasl.server.max.receive.size", _I, 524288, at_least(1), _LOW,
       "Largest frame accepted from a SASL connection before it has authenticated; a larger "
       "one closes the connection."),
    _k("connections.max.reauth.ms", _L, 0, at_least(0), _MEDIUM,
       "KIP-368: a SASL session lasts this long, or less when its OAUTHBEARER token expires "
       "sooner (told to the client in SaslAuthenticate v1+). The client re-authenticates on "
       "the same connection (SaslHandshake and SaslAuthenticate again, the same principal "
       "and mechanism, at most once a second; pybroker's client does it at 85-95 % of the "
       "lifetime); a connection that has not by then is closed at its next request, whatever "
       "its SaslAuthenticate version, as Kafka does. 0: sessions never expire, and a "
       "SaslHandshake on an authenticated connection is answered ILLEGAL_SASL_STATE. "
       "listener.name.<l>.connections.max.reauth.ms overrides it per listener, and "
       "listener.name.<l>.<mechanism>.connections.max.reauth.ms per listener and mechanism."),
    _k("num.network.threads", _I, 3, at_least(1), _HIGH,
       "Kafka's network thread count. Accepted; pybroker serves each connection as a task.", na=True),
    _k("num.io.threads", _I, 8, at_least(1), _HIGH,
       "Kafka's request handler thread count. Accepted; unused.", na=True),
    _k("num.cores", _I, -1, CountOrAll(), _HIGH,
       "How many cores this node serves with: with N > 1, pybroker-server runs N brokers, one "
       "process each, as one cluster (a Python process uses one core). -1, the default: "
       "every CPU the process may use (its affinity mask, as taskset or a container's cpuset "
       "sets it), so one broker process on a machine of one CPU. 1: one broker process. "
       "pybroker's own key (Kafka spreads one JVM over num.network.threads and "
       "num.io.threads). Broker K of the node has id node.id + 1000 K, every listener port "
       "+ K (0 stays 0) and log dirs suffixed -K (broker 0 keeps node.id, the ports and "
       "log.dirs); broker.rack defaults to the host name. Read at start only "
       "(docs/OPERATIONS.md, \"One node, every core\")."),
    _k("background.threads", _I, 10, at_least(1), _HIGH,
       "Kafka's background thread count. Accepted; unused.", na=True),
    # Kafka's default for both is 102400. pybroker's is -1: fixed 100 KB buffers cost 20-30 %
    # of large-record produce and consume throughput here against Linux's autotuning (more
    # partial writes, each a wait on the event loop). A configured value is applied as Kafka
    # applies it (Kafka's own server.properties sets 102400).
    _k("socket.send.buffer.bytes", _I, -1, None, _HIGH,
       "SO_SNDBUF of client connections; -1 (pybroker's default; Kafka's is 102400) keeps "
       "the operating system's autotuning."),
    _k("socket.receive.buffer.bytes", _I, -1, None, _HIGH,
       "SO_RCVBUF of client connections, set on the listening socket; -1 (pybroker's "
       "default; Kafka's is 102400) keeps the operating system's autotuning."),
    _k("socket.request.max.bytes", _I, 104857600, at_least(1), _HIGH,
       "Largest request accepted. A larger frame is refused from its length prefix, before "
       "any of it is buffered."),
    _k("socket.listen.backlog.size", _I, 1024, at_least(1), _MEDIUM,
       "Length of the queue of connections not yet accepted, per listening socket (capped by "
       "net.core.somaxconn). pybroker's default is 1024, Kafka's 50: Kafka accepts on a "
       "thread of its own, pybroker between requests, and 1,000 clients connecting at once "
       "overflowed a queue of 50 (each dropped SYN costs its client a 1 s retransmit)."),
    _k("connections.max.idle.ms", _L, 600000, None, _MEDIUM,
       "Close a client connection that has sent nothing for this long."),
    _k("max.connections", _I, INT32_MAX, at_least(0), _MEDIUM,
       "Most client connections open at once; new ones wait beyond it."),
    _k("max.connections.per.ip", _I, INT32_MAX, at_least(0), _MEDIUM,
       "Most client connections open at once from one address."),
    _k("queued.max.request.bytes", _L, 268435456, None, _MEDIUM,
       "Memory request bodies (and fetch responses held in memory) may take at once; when it "
       "is used up, connections stop reading until requests are answered (backpressure). A "
       "frame larger than it is refused. Frames up to 64 KiB are served outside it. 0 or -1: "
       "no bound (Kafka's default); pybroker's default is 256 MiB, so a broker is safe "
       "without configuration."),
    # --- TLS (SSL and SASL_SSL listeners; each may be set per listener as
    # listener.name.<listener>.<key>, the listener's name in lower case, as in Kafka) ------------
    _k("ssl.keystore.type", _S, "PEM", None, _MEDIUM,
       "Format of the key store. pybroker reads PEM only (its default; Kafka's is JKS): JKS "
       "and PKCS12 are refused at start. Convert with keytool -importkeystore and openssl."),
    _k("ssl.keystore.location", _S, None, None, _HIGH,
       "PEM file with this broker's private key and its certificate chain (server "
       "certificate first)."),
    _k("ssl.keystore.password", _P, None, None, _HIGH,
       "Password of a JKS or PKCS12 key store. Not used with PEM (Kafka refuses it there too): "
       "an encrypted PEM key takes ssl.key.password.", sensitive=True),
    _k("ssl.keystore.certificate.chain", _P, None, None, _HIGH,
       "This broker's certificate chain as inline PEM, instead of ssl.keystore.location "
       "(with ssl.keystore.key).", sensitive=True),
    _k("ssl.keystore.key", _P, None, None, _HIGH,
       "This broker's private key as inline PEM (PKCS#8 or traditional), instead of "
       "ssl.keystore.location (with ssl.keystore.certificate.chain).", sensitive=True),
    _k("ssl.key.password", _P, None, None, _HIGH,
       "Password of an encrypted private key (in ssl.keystore.location or "
       "ssl.keystore.key).", sensitive=True),
    _k("ssl.truststore.type", _S, "PEM", None, _MEDIUM,
       "Format of the trust store: PEM only, as ssl.keystore.type (Kafka's default is JKS)."),
    _k("ssl.truststore.location", _S, None, None, _HIGH,
       "PEM file of the CA certificates that client certificates are checked against. Unset "
       "(and no ssl.truststore.certificates): the system's CAs."),
    _k("ssl.truststore.password", _P, None, None, _HIGH,
       "Password of a JKS or PKCS12 trust store; not used with PEM.", sensitive=True),
    _k("ssl.truststore.certificates", _P, None, None, _HIGH,
       "Trusted CA certificates as inline PEM, instead of ssl.truststore.location.",
       sensitive=True),
    _k("ssl.client.auth", _S, "none", OneOf(("required", "requested", "none")), _MEDIUM,
       "Whether clients must present a certificate signed by a trusted CA: required (no "
       "certificate, or an untrusted one, fails the handshake), requested (one is asked for; "
       "an untrusted one fails the handshake, none is accepted), none. With a certificate the "
       "connection's principal is User:<subject DN, RFC 2253> after "
       "ssl.principal.mapping.rules; without one, User:ANONYMOUS."),
    _k("ssl.protocol", _S, "TLSv1.3", None, _MEDIUM,
       "Java's SSLContext algorithm. Accepted; as in Kafka when ssl.enabled.protocols is "
       "set (it always is), the enabled protocols decide what is negotiated.", na=True),
    _k("ssl.enabled.protocols", _LS, ("TLSv1.2", "TLSv1.3"),
       ListOf(("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1")), _MEDIUM,
       "TLS versions accepted. TLSv1 and TLSv1.1 are accepted by name only where the "
       "system's OpenSSL still offers them."),
    _k("ssl.cipher.suites", _LS, (), None, _LOW,
       "TLS 1.2 cipher suites to allow, by IANA (Java) or OpenSSL name; empty: OpenSSL's "
       "defaults. TLS 1.3 suites are always OpenSSL's."),
    _k("ssl.principal.mapping.rules", _S, "DEFAULT", None, _LOW,
       "Rules from a client certificate's subject DN (RFC 2253, e.g. CN=alice,OU=eng) to the "
       "principal name, Kafka's syntax: a comma-separated list of RULE:pattern/replacement/ "
       "with an optional L or U (lower/upper case) after the last slash, and DEFAULT (the DN "
       "itself). The first rule whose pattern matches the whole DN wins; none: the handshake's "
       "connection is closed."),
    _k("ssl.endpoint.identification.algorithm", _S, "https", None, _LOW,
       "Host name verification of the server certificate when a broker reaches another over "
       "TLS (https: verify it; empty: don't)."),
    _k("ssl.keymanager.algorithm", _S, "SunX509", None, _LOW,
       "Java's key manager factory. Accepted; Python's ssl module has none.", na=True),
    _k("ssl.trustmanager.algorithm", _S, "PKIX", None, _LOW,
       "Java's trust manager factory. Accepted; Python's ssl module has none.", na=True),
    _k("ssl.provider", _S, None, None, _LOW,
       "Java's security provider. Accepted; pybroker uses the system's OpenSSL.", na=True),
    _k("ssl.secure.random.implementation", _S, None, None, _LOW,
       "Java's SecureRandom. Accepted; OpenSSL seeds itself.", na=True),
    _k("ssl.engine.factory.class", _S, None, None, _LOW,
       "A Java SslEngineFactory class. Accepted; not applicable.", na=True),
    # --- the HTTP side door (not Kafka's: Redpanda's admin port is 9644) -------------------------
    _k("http.listeners", _LS, (), None, _MEDIUM,
       "Where to serve /healthz, /readyz and /metrics (Prometheus text), as comma-separated "
       "http://host:port; port 0 picks a free port. Empty (the default) serves no HTTP; the "
       "shipped config files set http://127.0.0.1:9644. Optional: an address that cannot be "
       "bound (a second broker made by copying the file) logs a warning and the broker "
       "serves without it. Not a Kafka key."),
    _k("http.request.timeout.ms", _I, 10000, at_least(1), _LOW,
       "How long an HTTP client may take to send a request's head (and how long a kept-alive "
       "connection may sit idle); slower connections are closed. Not a Kafka key."),
    _k("http.status.sample.interval.ms", _I, 5000, at_least(100), _LOW,
       "How often the status page (/ on the HTTP side door) samples throughput and consumer "
       "lag for its charts; it keeps the last 120 samples (ten minutes by default). Not a "
       "Kafka key."),
    # --- the broker's own logging (not Kafka's: Kafka configures it in log4j files) -----------
    _k("log.format", _S, "text", OneOf(("text", "json")), _LOW,
       "How the broker writes its log lines to stderr: text (`[time] LEVEL message (logger)`, "
       "like Kafka's log4j pattern) or json (one JSON object per line: timestamp, level, "
       "logger, message, exception). Applied by pybroker-server to the whole process; an "
       "in-process test broker leaves the test's logging alone. Not a Kafka key (the log "
       "layout is a log4j setting there)."),
    _k("request.log.enable", _B, False, None, _LOW,
       "Write one line per request to the logger pybroker.request.logger (Kafka's "
       "kafka.request.logger): API, version, client id, client address, listener, principal, "
       "error code and time. Off by default: when off it costs the request path one "
       "attribute check. Not a Kafka key (Kafka enables that logger in log4j)."),
    _k("quota.window.num", _I, 11, at_least(1), _LOW,
       "The number of samples kept to measure client quota rates (producer_byte_rate, "
       "consumer_byte_rate)."),
    _k("quota.window.size.seconds", _I, 1, at_least(1), _LOW,
       "The time span of each sample of a client quota rate."),
    _k("controller.quota.window.num", _I, 11, at_least(1), _LOW,
       "With controller.quota.window.size.seconds, the burst of controller_mutation_rate: a "
       "client may create or delete up to num x size x rate partitions at once."),
    _k("controller.quota.window.size.seconds", _I, 1, at_least(1), _LOW,
       "The time span of each sample of controller_mutation_rate (see "
       "controller.quota.window.num)."),
    _k("queued.max.requests", _I, 500, at_least(1), _HIGH,
       "Kafka's request queue bound. Accepted; pybroker handles one request per connection at "
       "a time, so connections are their own back-pressure.", na=True),
    # --- logs -----------------------------------------------------------------------------------
    _k("num.partitions", _I, 1, at_least(1), _MEDIUM,
       "Partitions of a topic created without an explicit count (auto-created, or -1)."),
    _k("log.dir", _LS, ("/tmp/kafka-logs",), NonEmptyUniqueList(), _HIGH,
       "Data directory, used only when log.dirs is unset; when both are set, a one-line "
       "warning at start names log.dirs as the one that wins."),
    _k("log.dirs", _LS, None, NonEmptyUniqueList(), _HIGH,
       "Comma-separated data directories, partitions spread over them. Wins over log.dir "
       "(with a warning at start when both are set)."),
    _k("log.segment.bytes", _I, 1073741824, at_least(14), _HIGH,
       "Start a new segment file when the active one would grow past this size."),
    _k("log.roll.ms", _L, None, at_least(1), _HIGH,
       "Start a new segment once the active one is this old, full or not. Unset: "
       "log.roll.hours."),
    _k("log.roll.hours", _I, 168, at_least(1), _HIGH,
       "log.roll.ms in hours; used when log.roll.ms is unset."),
    _k("log.roll.jitter.ms", _L, None, at_least(0), _HIGH,
       "Random time taken off the roll age so that partitions do not all roll together. "
       "Unset: log.roll.jitter.hours."),
    _k("log.roll.jitter.hours", _I, 0, at_least(0), _HIGH,
       "log.roll.jitter.ms in hours; used when log.roll.jitter.ms is unset."),
    _k("log.retention.ms", _L, None, None, _HIGH,
       "Delete segments whose newest record is older than this; -1 (any negative) keeps data "
       "forever. Wins over log.retention.minutes and log.retention.hours."),
    _k("log.retention.minutes", _I, None, None, _HIGH,
       "Retention in minutes; used when log.retention.ms is unset. Wins over hours."),
    _k("log.retention.hours", _I, 168, None, _HIGH,
       "Retention in hours; used when neither log.retention.ms nor .minutes is set."),
    _k("log.retention.bytes", _L, -1, None, _HIGH,
       "Delete the oldest segments while a partition is larger than this; -1: no size limit."),
    _k("log.retention.check.interval.ms", _L, 300000, at_least(1), _MEDIUM,
       "How often the broker looks for segments that retention allows it to delete."),
    _k("log.cleanup.policy", _LS, ("delete",), ListOf(CLEANUP_POLICIES), _MEDIUM,
       "What happens to old segments: delete them, compact them (keep the newest record of "
       "each key), or both (compact,delete)."),
    _k("log.index.size.max.bytes", _I, 10485760, at_least(4), _MEDIUM,
       "Size each offset index file is preallocated to; a segment rolls when its index is full."),
    _k("log.index.interval.bytes", _I, 4096, at_least(0), _MEDIUM,
       "Bytes of log between two entries of the sparse offset and time indexes."),
    _k("log.flush.interval.messages", _L, INT64_MAX, at_least(1), _HIGH,
       "fsync a partition after this many appended messages. Default: never by count."),
    _k("log.flush.interval.ms", _L, None, at_least(0), _HIGH,
       "fsync a partition once its oldest unflushed write is this old. Unset: "
       "log.flush.scheduler.interval.ms."),
    _k("log.flush.scheduler.interval.ms", _L, INT64_MAX, at_least(0), _HIGH,
       "How often the flusher looks for partitions due a flush; also log.flush.interval.ms's "
       "fallback."),
    _k("log.flush.offset.checkpoint.interval.ms", _I, 60000, at_least(0), _HIGH,
       "How often each partition's recovery point (last flushed offset) and high watermark "
       "are checkpointed."),
    _k("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, at_least(0), _HIGH,
       "How often each partition's log start offset is checkpointed."),
    _k("log.segment.delete.delay.ms", _L, 60000, at_least(0), _HIGH,
       "Time between a segment leaving the log and its files being deleted, so that reads "
       "already under way can finish."),
    _k("log.preallocate", _B, False, None, _MEDIUM,
       "Kafka creates segment files at their full size up front (for Windows file systems). "
       "Accepted; pybroker's segment files grow as they are written.", na=True),
    _k("num.recovery.threads.per.data.dir", _I, 1, at_least(1), _HIGH,
       "Kafka's log recovery thread count. Accepted; unused.", na=True),
    _k("log.message.timestamp.type", _S, "CreateTime", OneOf(TIMESTAMP_TYPES), _MEDIUM,
       "Record timestamps kept: the producer's (CreateTime) or the broker's clock at append "
       "(LogAppendTime)."),
    _k("log.message.timestamp.before.max.ms", _L, INT64_MAX, at_least(0), _MEDIUM,
       "With CreateTime, refuse a batch whose timestamp is further than this in the past."),
    _k("log.message.timestamp.after.max.ms", _L, 3_600_000, at_least(0), _MEDIUM,
       "With CreateTime, refuse a batch whose timestamp is further than this in the future."),
    _k("log.message.downconversion.enable", _B, True, None, _LOW,
       "Whether a fetch by an old client (message format v0/v1) may be served by converting "
       "batches down to its format. Accepted; unused: Fetch is served from v4, whose clients "
       "read magic-2 batches, so nothing is ever converted (as in Kafka 4).", na=True),
    _k("auto.create.topics.enable", _B, True, None, _HIGH,
       "Create a topic with default settings when a Metadata request that allows it names an "
       "unknown topic."),
    _k("delete.topic.enable", _B, True, None, _HIGH,
       "Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED."),
    _k("min.insync.replicas", _I, 1, at_least(1), _HIGH,
       "With acks=all, how many in-sync replicas must hold a write before it is acknowledged."),
    _k("compression.type", _S, "producer", OneOf(COMPRESSION_TYPES), _HIGH,
       "Compression kept on disk: producer keeps the producer's; a codec name recompresses; "
       "uncompressed stores plain records."),
    _k("message.max.bytes", _I, 1048588, at_least(0), _HIGH,
       "Largest record batch accepted, after compression."),
    # --- log cleaner (compaction) ---------------------------------------------------------------
    _k("log.cleaner.enable", _B, True, None, _MEDIUM,
       "Run the log cleaner, which compacts topics whose cleanup.policy includes compact."),
    _k("log.cleaner.threads", _I, 1, at_least(0), _MEDIUM,
       "Number of logs cleaned at the same time, each in its own worker thread; 0 cleans "
       "nothing (Kafka then starts no cleaner thread)."),
    _k("log.cleaner.backoff.ms", _L, 15000, at_least(0), _MEDIUM,
       "How long the cleaner sleeps when no log needs cleaning."),
    _k("log.cleaner.dedupe.buffer.size", _L, 134217728, None, _MEDIUM,
       "Memory for the key → offset map built while cleaning, over all cleaner threads."),
    _k("log.cleaner.io.buffer.size", _I, 524288, at_least(0), _MEDIUM,
       "Read and write buffer memory of the cleaner, over all cleaner threads: each reads "
       "and writes segments in chunks of this / threads / 2 bytes (a larger batch whole)."),
    _k("log.cleaner.delete.retention.ms", _L, 86400000, at_least(0), _MEDIUM,
       "How long delete markers (tombstones) stay in a compacted log, so that a consumer "
       "catching up still sees the deletion."),
    _k("log.cleaner.min.cleanable.ratio", _D, 0.5, between(0, 1), _MEDIUM,
       "Compact a log only when at least this fraction of it has not been compacted yet."),
    _k("log.cleaner.min.compaction.lag.ms", _L, 0, at_least(0), _MEDIUM,
       "A record stays uncompacted at least this long."),
    _k("log.cleaner.max.compaction.lag.ms", _L, INT64_MAX, at_least(1), _MEDIUM,
       "A record becomes eligible for compaction at the latest after this long."),
    # --- replication ----------------------------------------------------------------------------
    _k("default.replication.factor", _I, 1, at_least(1), _MEDIUM,
       "Replicas of a topic created without an explicit factor (auto-created, or -1)."),
    _k("replica.fetch.max.bytes", _I, 1048576, at_least(0), _MEDIUM,
       "Bytes a follower asks for per partition in one fetch (a larger first batch still "
       "comes through)."),
    _k("replica.fetch.wait.max.ms", _I, 500, None, _MEDIUM,
       "How long a follower's fetch waits at the leader for new data."),
    _k("replica.fetch.min.bytes", _I, 1, None, _MEDIUM,
       "Bytes a follower's fetch waits for before returning early."),
    _k("leader.replication.throttled.rate", _L, INT64_MAX, at_least(0), _MEDIUM,
       "Bytes per second this broker, as leader, sends to followers of the partitions named "
       "in leader.replication.throttled.replicas while they are out of sync. Set "
       "dynamically (per broker or as the cluster default), as kafka-reassign-partitions "
       "--throttle does; Kafka accepts it only dynamically, pybroker also from the file."),
    _k("follower.replication.throttled.rate", _L, INT64_MAX, at_least(0), _MEDIUM,
       "Bytes per second this broker, as an out-of-sync follower, fetches of the partitions "
       "named in follower.replication.throttled.replicas. Dynamic, as "
       "leader.replication.throttled.rate."),
    _k("replication.quota.window.num", _I, 11, at_least(1), _LOW,
       "The number of samples kept to measure the replication throttle rates."),
    _k("replication.quota.window.size.seconds", _I, 1, at_least(1), _LOW,
       "The time span of each sample of a replication throttle rate."),
    _k("replica.lag.time.max.ms", _L, 30000, None, _HIGH,
       "A follower that has not caught up within this long leaves the in-sync replicas."),
    _k("replica.selector.class", _S, None,
       KnownClass(("org.apache.kafka.common.replica.RackAwareReplicaSelector",)), _MEDIUM,
       "Which replica a consumer reads from (KIP-392). Unset, as in Kafka: always the leader. "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector: a consumer whose client.rack "
       "matches the broker.rack of an in-sync follower (and not the leader's) is sent there, "
       "and followers serve such consumers up to their high watermark. Any other class is "
       "refused at start."),
    _k("replica.socket.timeout.ms", _I, 30000, None, _HIGH,
       "Network timeout of a follower's requests to the leader."),
    _k("replica.high.watermark.checkpoint.interval.ms", _L, 5000, None, _HIGH,
       "How often high watermarks are written to replication-offset-checkpoint."),
    _k("num.replica.fetchers", _I, 1, None, _HIGH,
       "Fetcher tasks per source broker used by followers.", inert="fetchers"),
    _k("unclean.leader.election.enable", _B, False, None, _HIGH,
       "Allow a replica outside the in-sync set to become leader, losing acknowledged writes, "
       "rather than leave a partition offline."),
    _k("auto.leader.rebalance.enable", _B, True, None, _HIGH,
       "Move leadership back to preferred replicas in the background."),
    _k("leader.imbalance.per.broker.percentage", _I, 10, at_least(0), _HIGH,
       "Share of a broker's preferred partitions it may not lead before the controller "
       "moves leadership back to it."),
    _k("leader.imbalance.check.interval.seconds", _L, 300, at_least(1), _HIGH,
       "How often the controller checks leader imbalance."),
    _k("controlled.shutdown.enable", _B, True, None, _MEDIUM,
       "On SIGTERM, move this broker's leaderships to other in-sync replicas before exiting."),
    _k("controlled.shutdown.max.retries", _I, 3, at_least(0), _MEDIUM,
       "Attempts at a controlled shutdown before the broker exits anyway."),
    _k("controlled.shutdown.retry.backoff.ms", _L, 5000, at_least(0), _MEDIUM,
       "Wait between controlled-shutdown attempts."),
    _k("replica.fetch.backoff.ms", _I, 1000, at_least(0), _MEDIUM,
       "How long a follower waits after a failed fetch before trying again."),
    _k("replica.fetch.response.max.bytes", _I, 10485760, at_least(0), _MEDIUM,
       "Bytes a follower asks for in one fetch, over all its partitions."),
    _k("fetch.max.bytes", _I, 57671680, at_least(1024), _MEDIUM,
       "Upper bound on one Fetch response, whatever the client asks for."),
    _k("max.incremental.fetch.session.cache.slots", _I, 1000, at_least(0), _MEDIUM,
       "Incremental fetch sessions (KIP-227) the broker keeps; when full, a new one takes the "
       "slot of a stale or less valuable one, or goes without. 0: no sessions."),
    # --- consumer groups and committed offsets --------------------------------------------------
    _k("group.initial.rebalance.delay.ms", _I, 3000, None, _MEDIUM,
       "How long a new group waits for more members before its first rebalance."),
    _k("group.min.session.timeout.ms", _I, 6000, None, _MEDIUM,
       "Shortest session timeout a group member may ask for."),
    _k("group.max.session.timeout.ms", _I, 1800000, None, _MEDIUM,
       "Longest session timeout a group member may ask for."),
    _k("group.max.size", _I, INT32_MAX, at_least(1), _MEDIUM,
       "Most members one consumer group may have."),
    _k("group.consumer.session.timeout.ms", _I, 45000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: how long a member may go without a heartbeat before it is "
       "fenced and its partitions move; a group's consumer.session.timeout.ms overrides it. "
       "Must lie within group.consumer.min./max.session.timeout.ms, and exceed "
       "group.consumer.heartbeat.interval.ms (checked at start)."),
    _k("group.consumer.min.session.timeout.ms", _I, 45000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: the least session timeout the broker or a group's config "
       "may set."),
    _k("group.consumer.max.session.timeout.ms", _I, 60000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: the greatest session timeout the broker or a group's config "
       "may set."),
    _k("group.consumer.heartbeat.interval.ms", _I, 5000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: the heartbeat interval members are told to keep; a group's "
       "consumer.heartbeat.interval.ms overrides it. Must lie within "
       "group.consumer.min./max.heartbeat.interval.ms."),
    _k("group.consumer.min.heartbeat.interval.ms", _I, 5000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: the least heartbeat interval the broker or a group's config "
       "may set."),
    _k("group.consumer.max.heartbeat.interval.ms", _I, 15000, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: the greatest heartbeat interval the broker or a group's "
       "config may set."),
    _k("group.consumer.max.size", _I, INT32_MAX, at_least(1), _MEDIUM,
       "KIP-848 consumer groups: most members one group may have (GROUP_MAX_SIZE_REACHED)."),
    _k("group.consumer.assignors", _LS, ("uniform", "range"), None, _MEDIUM,
       "KIP-848 consumer groups: the server-side assignors served, by name (uniform, range) "
       "or by Kafka's class name for them (org.apache.kafka.coordinator.group.assignor."
       "UniformAssignor, ...RangeAssignor). The first is used when no member names one in "
       "ServerAssignor (group.remote.assignor); a name outside the list is "
       "UNSUPPORTED_ASSIGNOR. Another class is refused at start, as Kafka refuses a class "
       "it cannot find: pybroker loads no Java assignors."),
    # Kafka lists the choices in its HashSet's order, which its message shows: kept here.
    _k("group.consumer.migration.policy", _S, "bidirectional",
       OneOfIgnoringCase(("disabled", "downgrade", "upgrade", "bidirectional")), _MEDIUM,
       "Which live groups may change protocol online: a classic group of the consumer "
       "protocol type when a KIP-848 member joins it (upgrade), a consumer group when its last "
       "KIP-848 member leaves and classic members remain (downgrade), both (Kafka 4's "
       "default) or neither. A refused upgrade is GROUP_ID_NOT_FOUND to the joining heartbeat; "
       "a refused downgrade leaves a consumer group of classic members. Whatever the policy, "
       "a classic JoinGroup into a consumer group with members is taken in as a classic "
       "member, as Kafka does."),
    # --- share groups (KIP-932) ------------------------------------------------------------------
    _k("group.share.enable", _B, False, None, _MEDIUM,
       "Serves share groups whatever the share.version feature's level, as Kafka 4.1's "
       "internal key of this name does (its integration and system tests set it; Kafka "
       "takes it silently and leaves share.version as it is). Unset, share groups wait "
       "for share.version 1, the way a cluster turns them on."),
    _k("group.share.record.lock.duration.ms", _I, 30000, between(1000, 3600000), _MEDIUM,
       "How long a share-group member holds the records a ShareFetch acquired for it before "
       "they become available to others again; a group's share.record.lock.duration.ms "
       "overrides it. Must lie within group.share.min./max.record.lock.duration.ms."),
    _k("group.share.min.record.lock.duration.ms", _I, 15000, between(1000, 30000), _MEDIUM,
       "The least record lock duration the broker or a share group's config may set."),
    _k("group.share.max.record.lock.duration.ms", _I, 60000, between(30000, 3600000), _MEDIUM,
       "The greatest record lock duration the broker or a share group's config may set."),
    _k("group.share.delivery.count.limit", _I, 5, between(2, 10), _MEDIUM,
       "Deliveries of one record to a share group; a record released or timed out after "
       "this many is archived instead of handed out again."),
    _k("group.share.partition.max.record.locks", _I, 2000, between(100, 10000), _MEDIUM,
       "In-flight records of one share-partition (its end offset minus its start offset) "
       "past which no new records are acquired; whole batches make it a soft cap."),
    _k("group.share.max.share.sessions", _I, 2000, at_least(1), _MEDIUM,
       "Share sessions this broker keeps; a member opening one more gets "
       "SHARE_SESSION_LIMIT_REACHED."),
    _k("group.share.max.size", _I, 200, at_least(1), _MEDIUM,
       "Most members one share group may have."),
    _k("group.share.session.timeout.ms", _I, 45000, at_least(1), _MEDIUM,
       "How long a share-group member may go without a heartbeat before it is removed; a "
       "group's share.session.timeout.ms overrides it. Must lie within "
       "group.share.min./max.session.timeout.ms, and exceed "
       "group.share.heartbeat.interval.ms."),
    _k("group.share.min.session.timeout.ms", _I, 45000, at_least(1), _MEDIUM,
       "The least share-group session timeout the broker or a group's config may set."),
    _k("group.share.max.session.timeout.ms", _I, 60000, at_least(1), _MEDIUM,
       "The greatest share-group session timeout the broker or a group's config may set."),
    _k("group.share.heartbeat.interval.ms", _I, 5000, at_least(1), _MEDIUM,
       "The heartbeat interval share-group members are told to keep; a group's "
       "share.heartbeat.interval.ms overrides it. Must lie within "
       "group.share.min./max.heartbeat.interval.ms."),
    _k("group.share.min.heartbeat.interval.ms", _I, 5000, at_least(1), _MEDIUM,
       "The least share-group heartbeat interval the broker or a group's config may set."),
    _k("group.share.max.heartbeat.interval.ms", _I, 15000, at_least(1), _MEDIUM,
       "The greatest share-group heartbeat interval the broker or a group's config may set."),
    _k("share.coordinator.state.topic.num.partitions", _I, 50, at_least(1), _HIGH,
       "Partitions of __share_group_state, where share groups keep their record states; "
       "fixed once the topic exists."),
    _k("share.coordinator.state.topic.replication.factor", _SH, 3, at_least(1), _HIGH,
       "Replicas of __share_group_state; unset, capped at the number of brokers as for "
       "__consumer_offsets."),
    _k("share.coordinator.state.topic.min.isr", _SH, 2, at_least(1), _HIGH,
       "min.insync.replicas of __share_group_state (capped at its replication factor)."),
    _k("offsets.topic.num.partitions", _I, 50, at_least(1), _HIGH,
       "Partitions of __consumer_offsets; fixed once the topic exists."),
    _k("offsets.topic.replication.factor", _SH, 3, at_least(1), _HIGH,
       "Replicas of __consumer_offsets. Set: as in Kafka, the topic is not created (groups "
       "get COORDINATOR_NOT_AVAILABLE) until this many brokers exist, so a single broker "
       "needs 1. Unset: 3, or the number of brokers if fewer (pybroker's difference, so that "
       "a broker with no configuration serves groups; Kafka would not create the topic)."),
    _k("offsets.topic.segment.bytes", _I, 104857600, at_least(1), _HIGH,
       "Segment size of __consumer_offsets, kept small so it compacts and loads fast."),
    _k("offsets.retention.minutes", _I, 10080, at_least(1), _HIGH,
       "How long committed offsets of an empty group (or an unsubscribed topic) are kept."),
    _k("offsets.retention.check.interval.ms", _L, 600000, at_least(1), _HIGH,
       "How often expired committed offsets are looked for."),
    _k("offsets.commit.timeout.ms", _I, 5000, at_least(1), _HIGH,
       "How long a write of the group coordinator (an offset commit, a group's assignment) "
       "waits for __consumer_offsets to commit it (its high watermark to pass it) before the "
       "client is answered COORDINATOR_NOT_AVAILABLE. A single broker's append commits at "
       "once."),
    _k("offset.metadata.max.bytes", _I, 4096, None, _HIGH,
       "Largest metadata string accepted with a committed offset."),
    # --- transactions and producer state --------------------------------------------------------
    _k("transaction.state.log.num.partitions", _I, 50, at_least(1), _HIGH,
       "Partitions of __transaction_state; fixed once the topic exists."),
    _k("transaction.state.log.replication.factor", _SH, 3, at_least(1), _HIGH,
       "Replicas of __transaction_state. Left unset, 3 capped at the number of brokers."),
    _k("transaction.state.log.min.isr", _I, 2, at_least(1), _HIGH,
       "min.insync.replicas of __transaction_state (capped at its replication factor)."),
    _k("transaction.state.log.segment.bytes", _I, 104857600, at_least(1), _HIGH,
       "Segment size of __transaction_state."),
    _k("transactional.id.expiration.ms", _I, 604800000, at_least(1), _HIGH,
       "Forget a transactional id that has not been used for this long."),
    _k("transaction.max.timeout.ms", _I, 900000, at_least(1), _HIGH,
       "Longest transaction timeout a producer may ask for."),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, at_least(1),
       _LOW, "How often timed-out transactions are looked for and aborted."),
    _k("producer.id.expiration.ms", _I, 86400000, at_least(1), _LOW,
       "Forget an idempotent producer's sequence state after this long without writes."),
)

BROKER_CONFIG_DEFS: Mapping[str, ConfigKey] = MappingProxyType(
    {key.name: key for key in BROKER_CONFIG_KEYS})

# Keys a listener may set for itself as listener.name.<listener>.<key> (Kafka's per-listener
# security settings); the broker-wide key is the fallback.
LISTENER_KEYS: frozenset[str] = frozenset(
    key.name for key in BROKER_CONFIG_KEYS if key.name.startswith("ssl.")) | {
    "sasl.enabled.mechanisms", "connections.max.reauth.ms", "sasl.server.max.receive.size",
    "sasl.jaas.config"}

# Topic config → the broker keys that supply its default, first set wins, with the factor that
# turns the broker unit into the topic's (hours → ms). Kafka's ServerTopicConfigSynonyms.
ALL_TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = MappingProxyType({
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                     ("log.retention.hours", _HOUR_MS)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
})

# Broker keys that stand for one another in DescribeConfigs (Kafka's
# DynamicBrokerConfig.brokerConfigSynonyms). Note the flush pair is one-way, as in Kafka.
_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
BROKER_SYNONYM_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    **{name: group for group in _GROUPS for name in group},
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
})
