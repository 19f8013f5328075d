--
-- PostgreSQL database dump
--

\restrict RdNrx2Z1EYo4UdnXb7zq6B66xfDfzgET3lG23xXOU2bTAVd1lQ3FIFKrWzz8W3Q

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: old_release; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA old_release;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: access_read; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.access_read (
    id integer NOT NULL,
    ts bigint NOT NULL,
    kind text NOT NULL,
    key_id integer,
    key_name text NOT NULL,
    source_ip text NOT NULL,
    query text NOT NULL,
    endpoints text,
    start_ms bigint,
    end_ms bigint,
    rows bigint,
    bytes bigint
);


--
-- Name: access_read_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.access_read_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: access_read_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.access_read_id_seq OWNED BY old_release.access_read.id;


--
-- Name: admin_action; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.admin_action (
    id integer NOT NULL,
    ts bigint NOT NULL,
    action text NOT NULL,
    key_id integer,
    key_name text NOT NULL,
    source_ip text NOT NULL,
    metadata text NOT NULL,
    endpoints text
);


--
-- Name: admin_action_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.admin_action_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: admin_action_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.admin_action_id_seq OWNED BY old_release.admin_action.id;


--
-- Name: alert; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.alert (
    id bigint NOT NULL,
    rule bigint NOT NULL,
    kind text NOT NULL,
    endpoint text NOT NULL,
    subject text NOT NULL,
    message text NOT NULL,
    detail text NOT NULL,
    ts bigint NOT NULL
);


--
-- Name: alert_delivery; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.alert_delivery (
    id bigint NOT NULL,
    alert bigint NOT NULL,
    destination text NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL,
    next_try bigint,
    error text DEFAULT ''::text NOT NULL,
    updated bigint NOT NULL
);


--
-- Name: alert_delivery_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.alert_delivery_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: alert_delivery_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.alert_delivery_id_seq OWNED BY old_release.alert_delivery.id;


--
-- Name: alert_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.alert_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: alert_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.alert_id_seq OWNED BY old_release.alert.id;


--
-- Name: alert_mark; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.alert_mark (
    rule bigint NOT NULL,
    subject text NOT NULL,
    ts bigint NOT NULL
);


--
-- Name: alert_rule; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.alert_rule (
    id bigint NOT NULL,
    kind text NOT NULL,
    endpoints text NOT NULL,
    client_ids text,
    destinations text NOT NULL,
    cooldown bigint NOT NULL,
    settings text NOT NULL,
    secret text NOT NULL,
    cursor bigint NOT NULL,
    created bigint NOT NULL,
    updated bigint NOT NULL
);


--
-- Name: alert_rule_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.alert_rule_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: alert_rule_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.alert_rule_id_seq OWNED BY old_release.alert_rule.id;


--
-- Name: alert_told; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.alert_told (
    rule bigint NOT NULL,
    subject text NOT NULL,
    ts bigint NOT NULL
);


--
-- Name: api_key; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.api_key (
    id integer NOT NULL,
    name text NOT NULL,
    secret_hash text NOT NULL,
    scopes text NOT NULL,
    endpoints text,
    created bigint NOT NULL,
    revoked bigint
);


--
-- Name: api_key_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.api_key_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: api_key_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.api_key_id_seq OWNED BY old_release.api_key.id;


--
-- Name: client; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.client (
    id bigint NOT NULL,
    endpoint integer NOT NULL,
    client_id text NOT NULL,
    alias text DEFAULT ''::text NOT NULL,
    host text DEFAULT ''::text NOT NULL,
    host_ts bigint,
    mac text DEFAULT ''::text NOT NULL,
    mac_ts bigint,
    ip text DEFAULT ''::text NOT NULL,
    ip_ts bigint,
    vendor text DEFAULT ''::text NOT NULL,
    vendor_ts bigint,
    os_type text DEFAULT ''::text NOT NULL,
    os_type_ts bigint,
    os_arch text DEFAULT ''::text NOT NULL,
    os_arch_ts bigint,
    os_version text DEFAULT ''::text NOT NULL,
    os_version_ts bigint,
    unlogged boolean,
    last_frozen bigint
);


--
-- Name: client_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.client_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: client_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.client_id_seq OWNED BY old_release.client.id;


--
-- Name: endpoint; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.endpoint (
    id integer NOT NULL,
    name text NOT NULL,
    lost_mark bigint
);


--
-- Name: endpoint_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.endpoint_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: endpoint_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.endpoint_id_seq OWNED BY old_release.endpoint.id;


--
-- Name: feed_loss; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.feed_loss (
    run text NOT NULL,
    endpoint bigint NOT NULL,
    place text NOT NULL,
    total bigint NOT NULL,
    updated bigint NOT NULL
);


--
-- Name: import_progress; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.import_progress (
    id integer NOT NULL,
    source text NOT NULL,
    "position" text NOT NULL,
    records bigint NOT NULL,
    skipped bigint NOT NULL,
    updated bigint NOT NULL
);


--
-- Name: import_progress_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.import_progress_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: import_progress_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.import_progress_id_seq OWNED BY old_release.import_progress.id;


--
-- Name: ingest_batch; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.ingest_batch (
    key text NOT NULL,
    created bigint NOT NULL,
    accepted bigint NOT NULL
);


--
-- Name: job_lease; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.job_lease (
    name text NOT NULL,
    holder text,
    expires bigint NOT NULL,
    last_run bigint NOT NULL
);


--
-- Name: name_seen; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.name_seen (
    term bigint NOT NULL,
    endpoint integer NOT NULL,
    first bigint NOT NULL,
    last bigint NOT NULL
);


--
-- Name: output; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.output (
    id bigint NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    url text NOT NULL,
    options text NOT NULL,
    shape text NOT NULL,
    endpoints text,
    cursor bigint NOT NULL,
    paused integer NOT NULL,
    created bigint NOT NULL,
    delivered bigint NOT NULL,
    skipped bigint NOT NULL,
    last_delivery bigint,
    failures integer NOT NULL,
    last_error text,
    last_error_at bigint
);


--
-- Name: output_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.output_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: output_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.output_id_seq OWNED BY old_release.output.id;


--
-- Name: privacy_age_mark; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.privacy_age_mark (
    endpoint integer NOT NULL,
    step text NOT NULL,
    upto bigint NOT NULL
);


--
-- Name: privacy_rewrite; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.privacy_rewrite (
    id integer NOT NULL,
    endpoint integer NOT NULL,
    detail text NOT NULL,
    kind text NOT NULL,
    ts_after bigint NOT NULL,
    ts_upto bigint NOT NULL,
    id_upto bigint NOT NULL,
    cursor_ts bigint NOT NULL,
    cursor_id bigint NOT NULL,
    total bigint NOT NULL,
    done bigint NOT NULL,
    created bigint NOT NULL
);


--
-- Name: privacy_rewrite_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.privacy_rewrite_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: privacy_rewrite_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.privacy_rewrite_id_seq OWNED BY old_release.privacy_rewrite.id;


--
-- Name: privacy_setting; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.privacy_setting (
    endpoint text NOT NULL,
    settings text NOT NULL,
    hash_key text DEFAULT ''::text NOT NULL
);


--
-- Name: record; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.record (
    id bigint NOT NULL,
    ts bigint NOT NULL,
    endpoint integer NOT NULL,
    client integer NOT NULL,
    profile integer,
    question integer NOT NULL,
    rr_type integer,
    status integer,
    protocol integer,
    action bigint,
    trigger_type integer,
    trigger_value integer,
    spoof_target integer,
    upstream integer,
    response_time_ms double precision,
    cached bigint,
    dnssec integer,
    src_ip integer,
    src_country integer,
    src_city integer,
    src_isp integer,
    src_asn bigint,
    dst_country integer,
    dst_isp integer,
    dst_asn bigint,
    answers integer
);


--
-- Name: record_block; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.record_block (
    id bigint NOT NULL,
    endpoint integer NOT NULL,
    hour bigint NOT NULL,
    first_ts bigint NOT NULL,
    last_ts bigint NOT NULL,
    first_id bigint NOT NULL,
    last_id bigint NOT NULL,
    n integer NOT NULL,
    client_filter bytea NOT NULL,
    question_filter bytea NOT NULL,
    data bytea NOT NULL
);


--
-- Name: record_block_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.record_block_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: record_block_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.record_block_id_seq OWNED BY old_release.record_block.id;


--
-- Name: record_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.record_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: record_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.record_id_seq OWNED BY old_release.record.id;


--
-- Name: rollup; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.rollup (
    dim integer NOT NULL,
    period bigint NOT NULL,
    endpoint integer NOT NULL,
    value bigint NOT NULL,
    n bigint NOT NULL
);


--
-- Name: schema_version; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.schema_version (
    version integer NOT NULL
);


--
-- Name: store_setting; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.store_setting (
    name text NOT NULL,
    value text NOT NULL
);


--
-- Name: stream_token; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.stream_token (
    id integer NOT NULL,
    token_hash text NOT NULL,
    expires bigint NOT NULL,
    principal text NOT NULL
);


--
-- Name: stream_token_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.stream_token_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: stream_token_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.stream_token_id_seq OWNED BY old_release.stream_token.id;


--
-- Name: term; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.term (
    id bigint NOT NULL,
    value text NOT NULL
);


--
-- Name: term_candidate; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.term_candidate (
    term bigint NOT NULL,
    since bigint NOT NULL
);


--
-- Name: term_domain; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.term_domain (
    term bigint NOT NULL,
    domain bigint NOT NULL
);


--
-- Name: term_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.term_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: term_id_seq; Type: SEQUENCE OWNED BY; Schema: old_release; Owner: -
--

ALTER SEQUENCE old_release.term_id_seq OWNED BY old_release.term.id;


--
-- Name: access_read id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.access_read ALTER COLUMN id SET DEFAULT nextval('old_release.access_read_id_seq'::regclass);


--
-- Name: admin_action id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.admin_action ALTER COLUMN id SET DEFAULT nextval('old_release.admin_action_id_seq'::regclass);


--
-- Name: alert id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert ALTER COLUMN id SET DEFAULT nextval('old_release.alert_id_seq'::regclass);


--
-- Name: alert_delivery id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_delivery ALTER COLUMN id SET DEFAULT nextval('old_release.alert_delivery_id_seq'::regclass);


--
-- Name: alert_rule id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_rule ALTER COLUMN id SET DEFAULT nextval('old_release.alert_rule_id_seq'::regclass);


--
-- Name: api_key id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.api_key ALTER COLUMN id SET DEFAULT nextval('old_release.api_key_id_seq'::regclass);


--
-- Name: client id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.client ALTER COLUMN id SET DEFAULT nextval('old_release.client_id_seq'::regclass);


--
-- Name: endpoint id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.endpoint ALTER COLUMN id SET DEFAULT nextval('old_release.endpoint_id_seq'::regclass);


--
-- Name: import_progress id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.import_progress ALTER COLUMN id SET DEFAULT nextval('old_release.import_progress_id_seq'::regclass);


--
-- Name: output id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.output ALTER COLUMN id SET DEFAULT nextval('old_release.output_id_seq'::regclass);


--
-- Name: privacy_rewrite id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.privacy_rewrite ALTER COLUMN id SET DEFAULT nextval('old_release.privacy_rewrite_id_seq'::regclass);


--
-- Name: record id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.record ALTER COLUMN id SET DEFAULT nextval('old_release.record_id_seq'::regclass);


--
-- Name: record_block id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.record_block ALTER COLUMN id SET DEFAULT nextval('old_release.record_block_id_seq'::regclass);


--
-- Name: stream_token id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.stream_token ALTER COLUMN id SET DEFAULT nextval('old_release.stream_token_id_seq'::regclass);


--
-- Name: term id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term ALTER COLUMN id SET DEFAULT nextval('old_release.term_id_seq'::regclass);


--
-- Data for Name: access_read; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: admin_action; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: alert; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: alert_delivery; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: alert_mark; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: alert_rule; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: alert_told; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: api_key; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: client; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.client VALUES (1, 2, 'laptop', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, NULL, 1795168800000);
INSERT INTO old_release.client VALUES (2, 2, 'tv', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, NULL, 1795169100000);
INSERT INTO old_release.client VALUES (3, 1, 'printer', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, NULL, 1795174200000);


--
-- Data for Name: endpoint; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.endpoint VALUES (1, 'office', NULL);
INSERT INTO old_release.endpoint VALUES (2, 'home', NULL);


--
-- Data for Name: feed_loss; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: import_progress; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: ingest_batch; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: job_lease; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: name_seen; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.name_seen VALUES (44, 2, 1795168800000, 1795168800000);
INSERT INTO old_release.name_seen VALUES (45, 2, 1795169100000, 1795169100000);
INSERT INTO old_release.name_seen VALUES (48, 1, 1795174200000, 1795174200000);
INSERT INTO old_release.name_seen VALUES (44, 0, 1795168800000, 1795168800000);
INSERT INTO old_release.name_seen VALUES (45, 0, 1795169100000, 1795169100000);
INSERT INTO old_release.name_seen VALUES (48, 0, 1795174200000, 1795174200000);


--
-- Data for Name: output; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: privacy_age_mark; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: privacy_rewrite; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: privacy_setting; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: record; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: record_block; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.record_block VALUES (1, 2, 498658, 1795168800000, 1795169100000, 1, 2, 2, '\x0000204000041014', '\x4100001200000204', '\x03020000001a00000029000000789c4b62800246a6ccff3c69158b18814c0686868793591a9260724c4c49086570a68e2e0018f3075a789ccb4b62800226263853b8210fce666480331b14114cadbcbc1408f3473d8cce8303b83abd06000b010e34');
INSERT INTO old_release.record_block VALUES (2, 1, 498659, 1795174200000, 1795174200000, 3, 3, 1, '\x0000000800400080', '\x0000000000801100', '\x03010000001a00000020000000789c4b628002e624fbe21d3f163232303426c1c4189310b230960100b86605a7789ccb4b62800266384b240fce64cc03821408fb477d1e020000bb750a68');


--
-- Data for Name: rollup; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.rollup VALUES (0, 20777, 2, 0, 2);
INSERT INTO old_release.rollup VALUES (0, 20777, 1, 0, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 2, 2, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 1, 3, 1);
INSERT INTO old_release.rollup VALUES (2, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (2, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (3, 20777, 2, 2, 2);
INSERT INTO old_release.rollup VALUES (3, 20777, 1, 3, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 2, 19, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 1, 20, 1);
INSERT INTO old_release.rollup VALUES (5, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (5, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (6, 20777, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (6, 20777, 2, 0, 1);
INSERT INTO old_release.rollup VALUES (6, 20777, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (7, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (7, 20777, 2, 33, 1);
INSERT INTO old_release.rollup VALUES (7, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 2, 42, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (9, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (9, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (10, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (10, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (11, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (11, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (12, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (12, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (13, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (13, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (14, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (14, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (15, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (15, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (16, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (16, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (17, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (17, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (18, 20777, 2, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (18, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (19, 498658, 2, 0, 2);
INSERT INTO old_release.rollup VALUES (19, 498659, 1, 0, 1);
INSERT INTO old_release.rollup VALUES (20, 1994632, 2, 0, 2);
INSERT INTO old_release.rollup VALUES (20, 1994638, 1, 0, 1);
INSERT INTO old_release.rollup VALUES (21, 498658, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (21, 498658, 2, 2, 1);
INSERT INTO old_release.rollup VALUES (21, 498659, 1, 3, 1);
INSERT INTO old_release.rollup VALUES (22, 498658, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (22, 498658, 2, 0, 1);
INSERT INTO old_release.rollup VALUES (22, 498659, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (23, 1994632, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (23, 1994632, 2, 0, 1);
INSERT INTO old_release.rollup VALUES (23, 1994638, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (26, 20777, 0, 355, 1);
INSERT INTO old_release.rollup VALUES (26, 20777, 0, 362, 1);
INSERT INTO old_release.rollup VALUES (26, 20777, 0, 387, 1);
INSERT INTO old_release.rollup VALUES (28, 498658, 0, 355, 1);
INSERT INTO old_release.rollup VALUES (28, 498658, 0, 362, 1);
INSERT INTO old_release.rollup VALUES (28, 498659, 0, 387, 1);


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.schema_version VALUES (14);


--
-- Data for Name: store_setting; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.store_setting VALUES ('rollup_layout', '0:n/1440m;1:client/1440m;2:profile/1440m;3:rr_type/1440m;4:status/1440m;5:protocol/1440m;6:action/1440m;7:trigger_type/1440m;8:trigger_value/1440m;9:spoof_target/1440m;10:upstream/1440m;11:cached/1440m;12:dnssec/1440m;13:src_country/1440m;14:src_isp/1440m;15:src_asn/1440m;16:dst_country/1440m;17:dst_isp/1440m;18:dst_asn/1440m;19:n/60m;20:n/15m;21:client/60m;22:action/60m;23:action/15m;24:question+action/23040m@all;25:question+action/5760m@all;26:question+action/1440m@all;27:question+action/360m@all;28:question+action/60m@all');
INSERT INTO old_release.store_setting VALUES ('stream_token_secret', '7760673dc7df700c7e9c8ad6830db38f64b82aeb57ad321d61c083144e0a231c');
INSERT INTO old_release.store_setting VALUES ('rollups_counted_through', '3');
INSERT INTO old_release.store_setting VALUES ('blocks_built_through', '{"question+action/23040m@all": 1298, "question+action/5760m@all": 5194, "question+action/360m@all": 83109}');


--
-- Data for Name: stream_token; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: term; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.term VALUES (1, '');
INSERT INTO old_release.term VALUES (2, 'A');
INSERT INTO old_release.term VALUES (3, 'AAAA');
INSERT INTO old_release.term VALUES (4, 'HTTPS');
INSERT INTO old_release.term VALUES (5, 'CNAME');
INSERT INTO old_release.term VALUES (6, 'PTR');
INSERT INTO old_release.term VALUES (7, 'TXT');
INSERT INTO old_release.term VALUES (8, 'MX');
INSERT INTO old_release.term VALUES (9, 'SRV');
INSERT INTO old_release.term VALUES (10, 'SOA');
INSERT INTO old_release.term VALUES (11, 'NS');
INSERT INTO old_release.term VALUES (12, 'SVCB');
INSERT INTO old_release.term VALUES (13, 'DS');
INSERT INTO old_release.term VALUES (14, 'DNSKEY');
INSERT INTO old_release.term VALUES (15, 'CAA');
INSERT INTO old_release.term VALUES (16, 'NAPTR');
INSERT INTO old_release.term VALUES (17, 'ANY');
INSERT INTO old_release.term VALUES (18, 'NULL');
INSERT INTO old_release.term VALUES (19, 'NOERROR');
INSERT INTO old_release.term VALUES (20, 'NXDOMAIN');
INSERT INTO old_release.term VALUES (21, 'SERVFAIL');
INSERT INTO old_release.term VALUES (22, 'REFUSED');
INSERT INTO old_release.term VALUES (23, 'FORMERR');
INSERT INTO old_release.term VALUES (24, 'NOTIMP');
INSERT INTO old_release.term VALUES (25, 'YXDOMAIN');
INSERT INTO old_release.term VALUES (26, 'NOTAUTH');
INSERT INTO old_release.term VALUES (27, 'legacy');
INSERT INTO old_release.term VALUES (28, 'doh');
INSERT INTO old_release.term VALUES (29, 'doh3');
INSERT INTO old_release.term VALUES (30, 'dot');
INSERT INTO old_release.term VALUES (31, 'doq');
INSERT INTO old_release.term VALUES (32, 'default');
INSERT INTO old_release.term VALUES (33, 'filter');
INSERT INTO old_release.term VALUES (34, 'service');
INSERT INTO old_release.term VALUES (35, 'custom');
INSERT INTO old_release.term VALUES (36, 'grule');
INSERT INTO old_release.term VALUES (37, 'rebind');
INSERT INTO old_release.term VALUES (38, 'secure');
INSERT INTO old_release.term VALUES (39, 'insecure');
INSERT INTO old_release.term VALUES (40, 'bogus');
INSERT INTO old_release.term VALUES (41, 'indeterminate');
INSERT INTO old_release.term VALUES (42, 'ads');
INSERT INTO old_release.term VALUES (43, 'example.org');
INSERT INTO old_release.term VALUES (44, 'example.com');
INSERT INTO old_release.term VALUES (45, 'ads.example.net');
INSERT INTO old_release.term VALUES (46, '[{"ips":["93.184.216.34"]}]');
INSERT INTO old_release.term VALUES (47, 'example.net');
INSERT INTO old_release.term VALUES (48, 'www.example.org');


--
-- Data for Name: term_candidate; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: term_domain; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.term_domain VALUES (45, 47);
INSERT INTO old_release.term_domain VALUES (48, 43);
INSERT INTO old_release.term_domain VALUES (44, 44);


--
-- Name: access_read_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.access_read_id_seq', 1, false);


--
-- Name: admin_action_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.admin_action_id_seq', 1, false);


--
-- Name: alert_delivery_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.alert_delivery_id_seq', 1, false);


--
-- Name: alert_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.alert_id_seq', 1, false);


--
-- Name: alert_rule_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.alert_rule_id_seq', 1, false);


--
-- Name: api_key_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.api_key_id_seq', 1, false);


--
-- Name: client_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.client_id_seq', 3, true);


--
-- Name: endpoint_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.endpoint_id_seq', 2, true);


--
-- Name: import_progress_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.import_progress_id_seq', 1, false);


--
-- Name: output_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.output_id_seq', 1, false);


--
-- Name: privacy_rewrite_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.privacy_rewrite_id_seq', 1, false);


--
-- Name: record_block_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.record_block_id_seq', 2, true);


--
-- Name: record_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.record_id_seq', 3, true);


--
-- Name: stream_token_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.stream_token_id_seq', 1, false);


--
-- Name: term_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.term_id_seq', 48, true);


--
-- Name: access_read access_read_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.access_read
    ADD CONSTRAINT access_read_pkey PRIMARY KEY (id);


--
-- Name: admin_action admin_action_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.admin_action
    ADD CONSTRAINT admin_action_pkey PRIMARY KEY (id);


--
-- Name: alert_delivery alert_delivery_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_delivery
    ADD CONSTRAINT alert_delivery_pkey PRIMARY KEY (id);


--
-- Name: alert_mark alert_mark_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_mark
    ADD CONSTRAINT alert_mark_pkey PRIMARY KEY (rule, subject);


--
-- Name: alert alert_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert
    ADD CONSTRAINT alert_pkey PRIMARY KEY (id);


--
-- Name: alert_rule alert_rule_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_rule
    ADD CONSTRAINT alert_rule_pkey PRIMARY KEY (id);


--
-- Name: alert_told alert_told_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.alert_told
    ADD CONSTRAINT alert_told_pkey PRIMARY KEY (rule, subject);


--
-- Name: api_key api_key_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.api_key
    ADD CONSTRAINT api_key_pkey PRIMARY KEY (id);


--
-- Name: client client_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.client
    ADD CONSTRAINT client_pkey PRIMARY KEY (id);


--
-- Name: endpoint endpoint_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.endpoint
    ADD CONSTRAINT endpoint_pkey PRIMARY KEY (id);


--
-- Name: feed_loss feed_loss_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.feed_loss
    ADD CONSTRAINT feed_loss_pkey PRIMARY KEY (run, endpoint, place);


--
-- Name: import_progress import_progress_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.import_progress
    ADD CONSTRAINT import_progress_pkey PRIMARY KEY (id);


--
-- Name: ingest_batch ingest_batch_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.ingest_batch
    ADD CONSTRAINT ingest_batch_pkey PRIMARY KEY (key);


--
-- Name: job_lease job_lease_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.job_lease
    ADD CONSTRAINT job_lease_pkey PRIMARY KEY (name);


--
-- Name: name_seen name_seen_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.name_seen
    ADD CONSTRAINT name_seen_pkey PRIMARY KEY (endpoint, term);


--
-- Name: output output_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.output
    ADD CONSTRAINT output_pkey PRIMARY KEY (id);


--
-- Name: privacy_age_mark privacy_age_mark_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.privacy_age_mark
    ADD CONSTRAINT privacy_age_mark_pkey PRIMARY KEY (endpoint, step);


--
-- Name: privacy_rewrite privacy_rewrite_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.privacy_rewrite
    ADD CONSTRAINT privacy_rewrite_pkey PRIMARY KEY (id);


--
-- Name: privacy_setting privacy_setting_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.privacy_setting
    ADD CONSTRAINT privacy_setting_pkey PRIMARY KEY (endpoint);


--
-- Name: record_block record_block_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.record_block
    ADD CONSTRAINT record_block_pkey PRIMARY KEY (id);


--
-- Name: record record_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.record
    ADD CONSTRAINT record_pkey PRIMARY KEY (id);


--
-- Name: rollup rollup_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.rollup
    ADD CONSTRAINT rollup_pkey PRIMARY KEY (dim, period, endpoint, value);


--
-- Name: store_setting store_setting_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.store_setting
    ADD CONSTRAINT store_setting_pkey PRIMARY KEY (name);


--
-- Name: stream_token stream_token_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.stream_token
    ADD CONSTRAINT stream_token_pkey PRIMARY KEY (id);


--
-- Name: term_candidate term_candidate_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term_candidate
    ADD CONSTRAINT term_candidate_pkey PRIMARY KEY (term);


--
-- Name: term_domain term_domain_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term_domain
    ADD CONSTRAINT term_domain_pkey PRIMARY KEY (term);


--
-- Name: term term_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term
    ADD CONSTRAINT term_pkey PRIMARY KEY (id);


--
-- Name: access_read_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX access_read_ts ON old_release.access_read USING btree (ts);


--
-- Name: admin_action_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX admin_action_ts ON old_release.admin_action USING btree (ts);


--
-- Name: alert_delivery_alert; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX alert_delivery_alert ON old_release.alert_delivery USING btree (alert);


--
-- Name: alert_delivery_state_next_try; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX alert_delivery_state_next_try ON old_release.alert_delivery USING btree (state, next_try);


--
-- Name: alert_rule_subject_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX alert_rule_subject_ts ON old_release.alert USING btree (rule, subject, ts);


--
-- Name: alert_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX alert_ts ON old_release.alert USING btree (ts);


--
-- Name: api_key_name; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX api_key_name ON old_release.api_key USING btree (name);


--
-- Name: api_key_secret_hash; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX api_key_secret_hash ON old_release.api_key USING btree (secret_hash);


--
-- Name: client_endpoint_client_id; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX client_endpoint_client_id ON old_release.client USING btree (endpoint, client_id);


--
-- Name: client_unlogged; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX client_unlogged ON old_release.client USING btree (endpoint, client_id) WHERE unlogged;


--
-- Name: endpoint_name; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX endpoint_name ON old_release.endpoint USING btree (name);


--
-- Name: import_progress_source; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX import_progress_source ON old_release.import_progress USING btree (source);


--
-- Name: ingest_batch_created; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX ingest_batch_created ON old_release.ingest_batch USING btree (created);


--
-- Name: output_name; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX output_name ON old_release.output USING btree (name);


--
-- Name: record_block_endpoint_hour_n_first_ts_last_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_block_endpoint_hour_n_first_ts_last_ts ON old_release.record_block USING btree (endpoint, hour, n, first_ts, last_ts);


--
-- Name: record_block_hour_endpoint_n_first_ts_last_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_block_hour_endpoint_n_first_ts_last_ts ON old_release.record_block USING btree (hour, endpoint, n, first_ts, last_ts);


--
-- Name: record_block_last_id_first_id; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_block_last_id_first_id ON old_release.record_block USING btree (last_id, first_id);


--
-- Name: record_client_ts_question; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_client_ts_question ON old_release.record USING btree (client, ts, question);


--
-- Name: record_endpoint_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_endpoint_ts ON old_release.record USING btree (endpoint, ts);


--
-- Name: record_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_ts ON old_release.record USING btree (ts);


--
-- Name: stream_token_token_hash; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX stream_token_token_hash ON old_release.stream_token USING btree (token_hash);


--
-- Name: term_domain_domain; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX term_domain_domain ON old_release.term_domain USING btree (domain);


--
-- Name: term_value_md5; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX term_value_md5 ON old_release.term USING btree (md5(value));


--
-- PostgreSQL database dump complete
--

\unrestrict RdNrx2Z1EYo4UdnXb7zq6B66xfDfzgET3lG23xXOU2bTAVd1lQ3FIFKrWzz8W3Q

