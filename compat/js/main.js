// kafkajs driven by compat/clients/kafkajs.py for pybroker's compatibility matrix.
//
//   node main.js SOCKET WATCH_PID     (or: node main.js versions 0)
//
// Serves JSON lines on a Unix socket, one session per connection, as compat/go does (see
// compat/helper_process.py): every cell of a matrix run reuses this one Node process. It ends
// when WATCH_PID (the matrix runner) is gone or after a minute without a connection.
'use strict'
const net = require('net')
const fs = require('fs')
const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel, ConfigResourceTypes, AssignerProtocol } = require('kafkajs')
const { LZ4, ZSTD } = require('./codecs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
CompressionCodecs[CompressionTypes.LZ4] = LZ4
CompressionCodecs[CompressionTypes.ZSTD] = ZSTD

const READ_TIMEOUT_MS = 20000
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }

class Failure extends Error {
  constructor (kind, message) { super(message); this.kind = kind }
}

const b = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))
const s64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))

function kafka (req) {
  return new Kafka({ clientId: 'compat-kafkajs', brokers: req.bootstrap.split(','), logLevel: logLevel.NOTHING,
    retry: { retries: 3 } })
}

function message (r) {
  const m = { key: b(r.key), value: b(r.value) }
  if (r.partition !== null && r.partition !== undefined) m.partition = r.partition
  if (r.timestamp !== null && r.timestamp !== undefined) m.timestamp = String(r.timestamp)
  if (r.headers && r.headers.length) {
    m.headers = {}
    for (const h of r.headers) {
      if (h.v === null) throw new Failure('na', "kafkajs's headers cannot carry a null value")
      const v = b(h.v)
      m.headers[h.k] = h.k in m.headers ? [].concat(m.headers[h.k], v) : v
    }
  }
  return m
}

function got (partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) headers.push({ k, v: s64(one) })
  }
  return { partition, offset: Number(m.offset), key: s64(m.key), value: s64(m.value), headers,
    timestamp: Number(m.timestamp) }
}

async function send (producer, req, compression) {
  try {
    await producer.send({ topic: req.topic, messages: req.recs.map(message), compression,
      acks: req.config && req.config.acks !== undefined ? Number(req.config.acks === 'all' ? -1 : req.config.acks) : -1 })
  } catch (e) {
    if (e instanceof Failure) throw e
    throw new Failure('produce', `${e.name}: ${e.message}`)
  }
}

function uniqueGroup () { return `compat-kafkajs-${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2)}` }

// consume reads through a throw-away group (kafkajs always consumes as a group member),
// seeking where asked; to the end, the position is what that group committed on stopping.
async function consume (req) {
  const k = kafka(req)
  const groupId = uniqueGroup()
  const consumer = k.consumer({ groupId, readUncommitted: req.isolation !== 'read_committed',
    maxWaitTimeInMs: 200, heartbeatInterval: 500 })
  const records = []
  const fetched = {} // partition -> the offset after the last one fetched, control records too
  const wanted = new Set(req.partitions)
  let startAt = null
  if (req.start === 'timestamp') {
    const admin = k.admin(); await admin.connect()
    try {
      const offsets = await admin.fetchTopicOffsetsByTimestamp(req.topic, req.at)
      startAt = offsets.find((o) => req.partitions.includes(o.partition)).offset
    } finally { await admin.disconnect() }
  } else if (req.start === 'offset') startAt = String(req.at)
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [req.topic], fromBeginning: true })
    let resolveDone
    const done = new Promise((resolve) => { resolveDone = resolve })
    await consumer.run({
      autoCommit: true,
      eachBatch: async ({ batch, resolveOffset }) => {
        for (const message of batch.messages) {
          if (wanted.has(batch.partition)) records.push(got(batch.partition, message))
          resolveOffset(message.offset)
        }
        // Where the fetcher goes on from: past control records fetched with the data.
        fetched[batch.partition] = Math.max(fetched[batch.partition] || 0, Number(batch.lastOffset()) + 1)
        if (records.length >= req.count) resolveDone()
      }
    })
    if (startAt !== null) for (const p of req.partitions) consumer.seek({ topic: req.topic, partition: p, offset: startAt })
    await Promise.race([done, new Promise((resolve) => setTimeout(resolve, READ_TIMEOUT_MS))])
    if (req.to_end) await new Promise((resolve) => setTimeout(resolve, 1000)) // past trailing markers
  } finally {
    await consumer.disconnect()
  }
  const positions = {}
  const committed = {}
  if (req.to_end) {
    const admin = k.admin(); await admin.connect()
    try {
      const [topic] = await admin.fetchOffsets({ groupId, topics: [req.topic] })
      for (const p of topic.partitions) {
        if (!wanted.has(p.partition)) continue
        committed[p.partition] = Number(p.offset)
        positions[p.partition] = Math.max(Number(p.offset), fetched[p.partition] || 0)
      }
      await admin.deleteGroups([groupId]).catch(() => {})
    } finally { await admin.disconnect() }
  }
  return { records: records.slice(0, req.to_end ? records.length : req.count), positions, committed }
}

async function consumeGroup (req) {
  const consumer = kafka(req).consumer({ groupId: req.group, maxWaitTimeInMs: 200 })
  const taken = []
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [req.topic], fromBeginning: true })
    let resolveDone
    const done = new Promise((resolve) => { resolveDone = resolve })
    await consumer.run({
      autoCommit: false,
      partitionsConsumedConcurrently: 1,
      eachMessage: async ({ topic, partition, message }) => {
        if (taken.length >= req.count) return
        taken.push(got(partition, message))
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        if (taken.length >= req.count) resolveDone()
      }
    })
    await Promise.race([done, new Promise((resolve) => setTimeout(resolve, READ_TIMEOUT_MS))])
  } finally {
    await consumer.disconnect()
  }
  return taken
}

async function member (session, req) {
  const consumer = kafka(req).consumer({ groupId: req.group, sessionTimeout: 10000, heartbeatInterval: 500,
    maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topics: [req.topic], fromBeginning: true })
  await consumer.run({
    autoCommitThreshold: 1,
    eachMessage: async ({ message }) => { session.send({ value: s64(message.value) }) }
  })
  session.send({ started: true })
  await session.nextLine() // "stop", or the connection closing
  await consumer.disconnect() // commits what was taken and leaves the group
}

async function admin (req, use) {
  const a = kafka(req).admin()
  await a.connect()
  try { return await use(a) } finally { await a.disconnect() }
}

// kafkajs has AlterConfigs only (no incremental form): it replaces every override, so the
// topic's other overrides are sent again.
async function overrides (a, topic) {
  const { resources } = await a.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false })
  const out = {}
  for (const e of resources[0].configEntries) if (!e.isDefault && e.configSource === 1) out[e.configName] = e.configValue
  return out
}

async function alter (a, topic, configs) {
  await a.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: Object.entries(configs).map(([name, value]) => ({ name, value })) }] })
}

// offsetsForTimes asks fetchTopicOffsetsByTimestamp once per distinct time (it lists every
// partition of the topic). It answers a time past every record with the high watermark,
// which the end offsets listed first tell apart: reported as null. Offsets only, no timestamps.
async function offsetsForTimes (a, req) {
  const high = {}
  for (const o of await a.fetchTopicOffsets(req.topic)) high[o.partition] = Number(o.high)
  const out = {}
  for (const [p, ms] of Object.entries(req.times)) {
    const listed = await a.fetchTopicOffsetsByTimestamp(req.topic, ms)
    const found = listed.find((o) => o.partition === Number(p))
    if (!found) throw new Error(`partition ${p} of ${req.topic} not listed`)
    out[p] = Number(found.offset) >= high[p] ? null : Number(found.offset)
  }
  return out
}

async function handle (session, req) {
  switch (req.op) {
    case 'produce': {
      if (!(req.codec in CODECS)) throw new Failure('na', `kafkajs has no ${req.codec} codec here`)
      const producer = kafka(req).producer({ idempotent: !!req.idempotent, maxInFlightRequests: req.idempotent ? 1 : undefined })
      await producer.connect()
      try { await send(producer, req, CODECS[req.codec]) } finally { await producer.disconnect() }
      return null
    }
    case 'txn_begin':
      if (!session.producer) {
        session.producer = kafka(req).producer({ transactionalId: req.transactional_id, idempotent: true, maxInFlightRequests: 1 })
        await session.producer.connect()
      }
      session.txn = await session.producer.transaction()
      return null
    case 'txn_produce':
      await send(session.txn, req, CompressionTypes.None)
      return null
    case 'txn_end':
      await (req.commit ? session.txn.commit() : session.txn.abort())
      return null
    case 'consume': return consume(req)
    case 'consume_group': return consumeGroup(req)
    case 'member': await member(session, req); return null
    case 'committed': return admin(req, async (a) => {
      const [topic] = await a.fetchOffsets({ groupId: req.group, topics: [req.topic] })
      const out = {}
      for (const p of req.partitions) out[p] = -1
      for (const p of topic.partitions) if (p.partition in out) out[p.partition] = Number(p.offset)
      return out
    })
    case 'offsets_for_times': return admin(req, (a) => offsetsForTimes(a, req))
    case 'list_groups': return admin(req, async (a) => (await a.listGroups()).groups.map((g) => g.groupId))
    case 'describe_group': return admin(req, async (a) => {
      const { groups: [g] } = await a.describeGroups([req.group])
      const members = g.members.map((m) => {
        const decoded = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
        return decoded ? decoded.assignment : {}
      })
      return { state: g.state, assignor: g.protocol, members }
    })
    case 'alter_group_offsets': return admin(req, (a) => a.setOffsets({ groupId: req.group, topic: req.topic,
      partitions: Object.entries(req.offsets).map(([p, o]) => ({ partition: Number(p), offset: String(o) })) }).then(() => null))
    case 'delete_group': return admin(req, async (a) => {
      const [result] = await a.deleteGroups([req.group])
      if (result.errorCode) throw new Error(`deleteGroups: error ${result.errorCode}`)
      return null
    })
    case 'create_topic': return admin(req, async (a) => {
      const ok = await a.createTopics({ waitForLeaders: true, topics: [{ topic: req.topic, numPartitions: req.total,
        configEntries: Object.entries(req.configs || {}).map(([name, value]) => ({ name, value })) }] })
      if (!ok) throw new Error('createTopics: the topic already exists')
      return null
    })
    case 'list_topics': return admin(req, (a) => a.listTopics())
    case 'partition_count': return admin(req, async (a) => {
      const { topics } = await a.fetchTopicMetadata({ topics: [req.topic] })
      return topics[0].partitions.length
    })
    case 'add_partitions': return admin(req, (a) => a.createPartitions({ topicPartitions: [{ topic: req.topic, count: req.total }] }).then(() => null))
    case 'delete_topic': return admin(req, (a) => a.deleteTopics({ topics: [req.topic] }).then(() => null))
    case 'describe_configs': return admin(req, async (a) => {
      const { resources } = await a.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: req.topic }], includeSynonyms: false })
      const out = {}
      for (const e of resources[0].configEntries) out[e.configName] = e.configValue
      return out
    })
    case 'set_config': return admin(req, async (a) => {
      await alter(a, req.topic, { ...(await overrides(a, req.topic)), [req.name]: req.value }); return null
    })
    case 'delete_config': return admin(req, async (a) => {
      const now = await overrides(a, req.topic); delete now[req.name]
      await alter(a, req.topic, now); return null
    })
  }
  throw new Error(`unknown op ${req.op}`)
}

function versions () {
  const out = { node: process.versions.node }
  for (const name of ['kafkajs', 'kafkajs-snappy', 'lz4js', '@bokuweb/zstd-wasm']) {
    // read from disk: zstd-wasm's "exports" hides its package.json from require
    out[name] = JSON.parse(fs.readFileSync(`${__dirname}/node_modules/${name}/package.json`, 'utf8')).version
  }
  return out
}

let active = 0
let lastSeen = Date.now()

function serve (socket) {
  active++
  const lines = readline.createInterface({ input: socket })[Symbol.asyncIterator]()
  const session = {
    send: (obj) => { if (!socket.destroyed) socket.write(JSON.stringify(obj) + '\n') },
    nextLine: async () => { const { value, done } = await lines.next(); return done ? null : value }
  }
  ;(async () => {
    try {
      for (;;) {
        const line = await session.nextLine()
        if (line === null) break
        let req
        try { req = JSON.parse(line) } catch (e) { session.send({ error: e.message, kind: 'error' }); break }
        try {
          session.send({ result: await handle(session, req) })
        } catch (e) {
          session.send({ error: `${e.name}: ${e.message}`, kind: e instanceof Failure ? e.kind : 'error' })
        }
      }
    } finally {
      if (session.producer) await session.producer.disconnect().catch(() => {})
      active--; lastSeen = Date.now(); socket.end()
    }
  })()
}

function main () {
  const [path, watchArg] = process.argv.slice(2)
  if (path === 'versions') { process.stdout.write(JSON.stringify(versions()) + '\n'); return }
  const watch = Number(watchArg)
  try { fs.unlinkSync(path) } catch (e) {}
  const server = net.createServer(serve)
  server.listen(path, () => process.stdout.write('ready\n'))
  setInterval(() => {
    let gone = false
    if (watch > 0) { try { process.kill(watch, 0) } catch (e) { gone = e.code === 'ESRCH' } }
    if (gone || (active === 0 && Date.now() - lastSeen > 60000)) {
      try { fs.unlinkSync(path) } catch (e) {}
      process.exit(0)
    }
  }, 1000).unref()
}

main()
