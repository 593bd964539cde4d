package service

import (
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/door"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// build makes the services and the handlers over the open store, each given
// the others it calls. Several call each other (the dispatcher wakes the ack
// expirer, which wakes the dispatcher; broker sessions feed the lease keeper,
// which reads their reports), so every one is allocated first and filled in
// after; nothing runs until Run starts the workers.
func (s *Service) build() {
	o, clk, log, st := s.opts, s.clock, s.log, s.store
	cfg, reader := o.Config, st.DB.Reader
	engine := engineclient.New(o.Engine)

	s.live = newLive()
	s.endpoints = &endpointBook{reader: reader}
	s.writer = newQueueWriter(log, clk, st.Queue)
	s.dispatcher, s.delivery, s.acks, s.rescuer = new(dispatcher), new(deliverer), new(ackExpirer), new(leaseRescuer)
	s.watcher, s.callers, s.brokers, s.keeper = new(watcher), new(callers), new(brokerSessions), new(keeper)
	s.engineLink = new(attachment)
	instance := store.NewID() // names this run's delivery claims
	s.publisher = newReceiptPublisher(o, st.Receipts, clk, log, s.engineLink)

	*s.engineLink = attachment{log: log, clock: clk, engine: engine, endpoints: s.endpoints, live: s.live, publisher: s.publisher,
		status: api.CoordinationStatus{Socket: o.Engine.Socket}, attached: map[string]bool{}, kick: make(chan struct{}, 1)}
	s.endpoints.onChange = s.engineLink.requestAttach
	*s.dispatcher = dispatcher{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, endpoints: s.endpoints, live: s.live,
		delivery: s.delivery, acks: s.acks, rescuer: s.rescuer, instance: instance, wakeCh: make(chan struct{}, 1)}
	*s.acks = ackExpirer{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, dispatcher: s.dispatcher, wakeCh: make(chan struct{}, 1)}
	*s.rescuer = leaseRescuer{log: log, clock: clk, deliveries: st.Deliveries, delivery: s.delivery, brokers: s.brokers,
		endpoints: s.endpoints, dispatcher: s.dispatcher, instance: instance, kick: make(chan struct{}, 1)}
	*s.watcher = watcher{log: log, clock: clk, config: cfg, reader: reader, deliveries: st.Deliveries, endpointTable: st.Endpoints,
		endpoints: s.endpoints, live: s.live, brokers: s.brokers, dispatcher: s.dispatcher, attacher: s.engineLink,
		serverStart: map[string]uint64{}, listed: map[string]time.Time{}, stopped: map[string]bool{},
		listDue: map[string]bool{}, listNow: make(chan struct{}, 1)}
	*s.callers = callers{clock: clk, live: s.live, endpoints: s.endpoints, watcher: s.watcher, log: log,
		engineProc: newEngineProcess(o.Engine), policy: door.Policy{TamqSocket: o.Paths.Socket, EngineSocket: o.Engine.Socket},
		agents: cfg.Delivery.AgentPrograms, senders: map[int]senderSeen{}}
	*s.brokers = brokerSessions{log: log, endpoints: s.endpoints, panes: s.live, watcher: s.watcher, keeper: s.keeper,
		dispatcher: s.dispatcher, rescuer: s.rescuer, work: s.work}
	*s.keeper = keeper{log: log, clock: clk, engine: engine, reader: reader, brokers: s.brokers,
		byWindow: map[string]*keptLease{}, kick: make(chan struct{}, 1)}
	writer := o.Writer
	if writer == nil {
		writer = RoutingWriter{brokers: s.brokers, config: cfg, brokerRuns: s.watcher.paneRunsBroker,
			tmux: TmuxWriter{Clock: clk, Pause: func(text string) time.Duration { return enterPause(cfg, text) }, Agent: s.watcher.paneAgent}}
	}
	*s.delivery = deliverer{log: log, clock: clk, config: cfg, deliveries: st.Deliveries, endpoints: s.endpoints, writer: writer,
		engine: engine, live: s.live, watcher: s.watcher, brokers: s.brokers, keeper: s.keeper}

	s.messages = &messageHandlers{log: log, clock: clk, config: cfg, registry: o.Registry, addresses: o.Addresses,
		callers: s.callers, endpoints: s.endpoints, live: s.live, writer: s.writer, dispatcher: s.dispatcher, watcher: s.watcher,
		queue: st.Queue, deliveries: st.Deliveries, receipts: st.Receipts}
	s.endpointOps = &endpointHandlers{log: log, config: cfg, paths: o.Paths, engine: o.Engine, registry: o.Registry, reader: reader,
		endpointTable: st.Endpoints, endpoints: s.endpoints, callers: s.callers, watcher: s.watcher, dispatcher: s.dispatcher}
	s.wakes = &wakeHandlers{log: log, clock: clk, config: cfg, paths: o.Paths, engine: o.Engine, registry: o.Registry, reader: reader,
		queue: st.Queue, endpoints: s.endpoints, live: s.live, callers: s.callers, brokers: s.brokers, watcher: s.watcher,
		dispatcher: s.dispatcher}
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
