--
-- PostgreSQL database dump
--

\restrict 2zMI5aw3FECGzpoLDJgbu65hDLyc3juxVAbxHeyrX07AsyWn8VHCZauJhk31zd7

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
    os_version_ts bigint
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
-- Name: job_lease; Type: TABLE; Schema: old_release; Owner: -
--

CREATE TABLE old_release.job_lease (
    name text NOT NULL,
    holder text,
    expires bigint NOT NULL,
    last_run bigint NOT NULL
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
    action integer,
    trigger_type integer,
    trigger_value integer,
    spoof_target integer,
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
    id integer NOT NULL,
    value text NOT NULL
);


--
-- Name: term_id_seq; Type: SEQUENCE; Schema: old_release; Owner: -
--

CREATE SEQUENCE old_release.term_id_seq
    AS integer
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
-- Name: admin_action id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.admin_action ALTER COLUMN id SET DEFAULT nextval('old_release.admin_action_id_seq'::regclass);


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
-- Name: record id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.record ALTER COLUMN id SET DEFAULT nextval('old_release.record_id_seq'::regclass);


--
-- Name: stream_token id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.stream_token ALTER COLUMN id SET DEFAULT nextval('old_release.stream_token_id_seq'::regclass);


--
-- Name: term id; Type: DEFAULT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term ALTER COLUMN id SET DEFAULT nextval('old_release.term_id_seq'::regclass);


--
-- Data for Name: admin_action; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: api_key; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: client; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.client VALUES (1, 1, 'laptop', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL);
INSERT INTO old_release.client VALUES (2, 1, 'tv', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL);
INSERT INTO old_release.client VALUES (3, 2, 'printer', '', '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL, '', NULL);


--
-- Data for Name: endpoint; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.endpoint VALUES (1, 'home', NULL);
INSERT INTO old_release.endpoint VALUES (2, 'office', NULL);


--
-- Data for Name: import_progress; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: job_lease; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: record; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.record VALUES (1, 1795168800000, 1, 1, NULL, 3, 8, 10, NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 7);
INSERT INTO old_release.record VALUES (2, 1795169100000, 1, 2, NULL, 2, 8, NULL, NULL, 0, 6, 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO old_release.record VALUES (3, 1795174200000, 2, 3, NULL, 4, 1, 9, NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);


--
-- Data for Name: rollup; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.rollup VALUES (0, 20777, 1, 1, 2);
INSERT INTO old_release.rollup VALUES (0, 20777, 2, 2, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 1, 2, 1);
INSERT INTO old_release.rollup VALUES (1, 20777, 2, 3, 1);
INSERT INTO old_release.rollup VALUES (2, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (2, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (3, 20777, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (3, 20777, 1, 0, 1);
INSERT INTO old_release.rollup VALUES (3, 20777, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 1, 6, 1);
INSERT INTO old_release.rollup VALUES (4, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (5, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (5, 20777, 1, 5, 1);
INSERT INTO old_release.rollup VALUES (5, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (6, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (6, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (7, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (7, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 1, 10, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 1, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (8, 20777, 2, 9, 1);
INSERT INTO old_release.rollup VALUES (9, 20777, 1, 8, 2);
INSERT INTO old_release.rollup VALUES (9, 20777, 2, 1, 1);
INSERT INTO old_release.rollup VALUES (10, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (10, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (11, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (11, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (12, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (12, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (13, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (13, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (14, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (14, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (15, 20777, 1, -4611686018427387904, 2);
INSERT INTO old_release.rollup VALUES (15, 20777, 2, -4611686018427387904, 1);
INSERT INTO old_release.rollup VALUES (16, 498658, 1, 0, 2);
INSERT INTO old_release.rollup VALUES (16, 498659, 2, 0, 1);
INSERT INTO old_release.rollup VALUES (17, 498658, 1, 1, 1);
INSERT INTO old_release.rollup VALUES (17, 498658, 1, 0, 1);
INSERT INTO old_release.rollup VALUES (17, 498659, 2, 1, 1);


--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.schema_version VALUES (6);


--
-- Data for Name: stream_token; Type: TABLE DATA; Schema: old_release; Owner: -
--



--
-- Data for Name: term; Type: TABLE DATA; Schema: old_release; Owner: -
--

INSERT INTO old_release.term VALUES (1, 'AAAA');
INSERT INTO old_release.term VALUES (2, 'ads.example.net');
INSERT INTO old_release.term VALUES (3, 'example.com');
INSERT INTO old_release.term VALUES (4, 'www.example.org');
INSERT INTO old_release.term VALUES (5, 'ads');
INSERT INTO old_release.term VALUES (6, 'filter');
INSERT INTO old_release.term VALUES (7, '[{"ips":["93.184.216.34"]}]');
INSERT INTO old_release.term VALUES (8, 'A');
INSERT INTO old_release.term VALUES (9, 'NXDOMAIN');
INSERT INTO old_release.term VALUES (10, 'NOERROR');


--
-- Name: admin_action_id_seq; Type: SEQUENCE SET; Schema: old_release; Owner: -
--

SELECT pg_catalog.setval('old_release.admin_action_id_seq', 1, false);


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

SELECT pg_catalog.setval('old_release.term_id_seq', 10, true);


--
-- Name: admin_action admin_action_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.admin_action
    ADD CONSTRAINT admin_action_pkey PRIMARY KEY (id);


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
-- Name: import_progress import_progress_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.import_progress
    ADD CONSTRAINT import_progress_pkey PRIMARY KEY (id);


--
-- Name: job_lease job_lease_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.job_lease
    ADD CONSTRAINT job_lease_pkey PRIMARY KEY (name);


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
-- Name: stream_token stream_token_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.stream_token
    ADD CONSTRAINT stream_token_pkey PRIMARY KEY (id);


--
-- Name: term term_pkey; Type: CONSTRAINT; Schema: old_release; Owner: -
--

ALTER TABLE ONLY old_release.term
    ADD CONSTRAINT term_pkey PRIMARY KEY (id);


--
-- Name: admin_action_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX admin_action_ts ON old_release.admin_action USING btree (ts);


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
-- Name: endpoint_name; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX endpoint_name ON old_release.endpoint USING btree (name);


--
-- Name: import_progress_source; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX import_progress_source ON old_release.import_progress USING btree (source);


--
-- Name: record_client_ts; Type: INDEX; Schema: old_release; Owner: -
--

CREATE INDEX record_client_ts ON old_release.record USING btree (client, ts);


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
-- Name: term_value_md5; Type: INDEX; Schema: old_release; Owner: -
--

CREATE UNIQUE INDEX term_value_md5 ON old_release.term USING btree (md5(value));


--
-- PostgreSQL database dump complete
--

\unrestrict 2zMI5aw3FECGzpoLDJgbu65hDLyc3juxVAbxHeyrX07AsyWn8VHCZauJhk31zd7

