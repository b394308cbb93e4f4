"""An OTLP/gRPC trace collector for scripts/e2e-otlp-grpc.sh: serves the
TraceService on a free loopback port, prints `port N` once it listens, then
one line per span received: `span SERVICE NAME`. Stops after the seconds given
(default 120), or when killed."""

import sys
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    print("span", service, span.name, flush=True)
        return trace_service_pb2.ExportTraceServiceResponse()


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Sink(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print("port", port, flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 120)
