# One image, every service: run it with the subcommand of the service you want.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/hookyard .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookyard /hookyard
# The production config: no secret has a fallback, so the image carries none.
COPY deploy/hookyard.yaml /etc/hookyard/hookyard.yaml
ENV HOOKYARD_CONFIG=/etc/hookyard/hookyard.yaml
ENTRYPOINT ["/hookyard"]
