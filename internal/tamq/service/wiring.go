package service

import (
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// build makes the services and the handlers over the open store, each given
// only what it calls: a value, a func, a wake-up signal, or a small
// interface declared where it is used. No service holds another's struct,
// and each is made after everything it is given, so this reads top to
// bottom; nothing runs until Run starts the workers. docs/layout.md lists
// who talks to whom, and through what.
func (s *Service) build() {
	o, clk, log, st := s.opts, s.clock, s.log, s.store
	cfg, reader := o.Config, st.DB.Reader
	engine := engineclient.New(o.Engine)
	instance := store.NewID() // names this run's delivery claims

	// The wake-ups of the workers, made first: whoever has work for a
	// worker wakes it, whichever of them is made first.
	dispatch := wakeup.New()       // the dispatcher: a message queued or a window freed
	deadlines := wakeup.New()      // the ack expirer: a delivery ended
	attach := wakeup.New()         // the attacher: the endpoints or their agents changed
	brokerAttached := wakeup.New() // the lease rescuer: a broker session opened
	leases := wakeup.New()         // the lease keeper: a broker reported, a wake was written

	// The shared views: the panes and why windows wait, the endpoints, the
	// broker sessions.
	s.live = newLive()
	s.endpoints = &endpointBook{reader: reader, onChange: attach.Wake}
	s.brokers = &brokerTable{}

	s.writer = newQueueWriter(log, clk, st.Queue)
	s.publisher = newReceiptPublisher(o, st.Receipts, clk, log)
	s.engineLink = &attachment{log: log, clock: clk, engine: engine, endpoints: s.endpoints, agentRunning: s.live.agentRunning,
		linkChanged: s.publisher.linkChanged, status: api.CoordinationStatus{Socket: o.Engine.Socket}, attached: map[string]bool{},
		again: attach}
	s.watcher = &watcher{log: log, clock: clk, config: cfg, reader: reader, deliveries: st.Deliveries, endpointTable: st.Endpoints,
		endpoints: s.endpoints, panes: s.live, brokers: s.brokers, dispatch: dispatch, attach: attach,
		serverStart: map[string]uint64{}, listed: map[string]time.Time{}, stopped: map[string]bool{},
		listDue: map[string]bool{}, listNow: wakeup.New()}
	s.keeper = &keeper{log: log, clock: clk, engine: engine, reader: reader, brokers: s.brokers,
		byWindow: map[string]*keptLease{}, look: leases}
	writer := o.Writer
	if writer == nil {
		writer = RoutingWriter{brokers: s.brokers, config: cfg, brokerRuns: s.watcher.paneRunsBroker,
			tmux: TmuxWriter{Clock: clk, Pause: func(text string) time.Duration { return enterPause(cfg, text) }, Agent: s.watcher.paneAgent}}
	}
	s.delivery = &deliverer{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, endpoints: s.endpoints, writer: writer,
		engine: engine, waitReason: s.live.waitReason, waits: s.watcher, brokers: s.brokers, leaseWritten: s.keeper.written,
		dispatch: dispatch}
	s.rescuer = &leaseRescuer{log: log, clock: clk, deliveries: st.Deliveries, record: s.delivery.record, brokers: s.brokers,
		endpoints: s.endpoints, dispatch: dispatch, instance: instance, brokerAttached: brokerAttached}
	s.dispatcher = &dispatcher{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, endpoints: s.endpoints,
		waitReason: s.live.waitReason, deliver: s.delivery.deliver, deadlines: deadlines, held: s.rescuer.holds,
		instance: instance, wakes: dispatch}
	s.acks = &ackExpirer{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, dispatch: dispatch, wakes: deadlines}
	s.callers = &callers{clock: clk, match: s.live.match, list: s.watcher.list, endpoints: s.endpoints, log: log,
		engineProc: newEngineProcess(o.Engine), policy: door.Policy{TamqSocket: o.Paths.Socket, EngineSocket: o.Engine.Socket},
		agents: cfg.Delivery.AgentPrograms, senders: map[int]senderSeen{}}

	// The handlers.
	s.sessions = &brokerSessions{log: log, endpoints: s.endpoints, addPane: s.live.addPane, sessions: s.brokers, reports: s.watcher,
		adoptWindow: s.keeper.adoptWindow, leases: leases, attached: brokerAttached, dispatch: dispatch, work: s.work}
	s.messages = &messageHandlers{log: log, clock: clk, config: cfg, registry: o.Registry, addresses: o.Addresses,
		callers: s.callers, endpoints: s.endpoints, waitReason: s.live.waitReason, enqueue: s.writer.enqueue,
		dispatcher: s.dispatcher, requestRebind: s.watcher.requestRebind,
		queue: st.Queue, deliveries: st.Deliveries, receipts: st.Receipts}
	s.endpointOps = &endpointHandlers{log: log, config: cfg, paths: o.Paths, engine: o.Engine, registry: o.Registry, reader: reader,
		endpointTable: st.Endpoints, endpoints: s.endpoints, watcher: s.watcher, dispatch: dispatch}
	s.wakes = &wakeHandlers{log: log, clock: clk, config: cfg, paths: o.Paths, engine: o.Engine, registry: o.Registry, reader: reader,
		queue: st.Queue, endpoints: s.endpoints, waits: s.live, brokers: s.brokers, watcher: s.watcher, dispatcher: s.dispatcher}
	s.purges = &purgeHandler{log: log, reader: reader, purges: st.Purges, database: o.Paths.Database, work: s.work}

	s.dispatcherWorker = &daemon.Worker{Name: "dispatcher", Run: s.dispatcher.run}
	s.workers = []*daemon.Worker{
		s.writer.worker,
		{Name: "ack expirer", Run: s.acks.run},
		{Name: "lease rescuer", Run: s.rescuer.run},
		{Name: "watcher", Run: s.watcher.run},
		{Name: "attacher", Run: s.engineLink.run},
		{Name: "publisher", Run: s.publisher.Run},
		{Name: "lease keeper", Run: s.keeper.run},
	}
}
