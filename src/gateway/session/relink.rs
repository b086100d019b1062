//! The session's link: the live one, or a fresh one started on the client's next request
//! when it died (the client's own `initialize` replayed, after a backoff that grows while
//! links keep dying).

use super::*;

impl Session {
    /// The live link, restarting one (with the client's `initialize` replayed) if it died.
    pub(super) async fn link(&self) -> Result<Arc<Link>, RpcError> {
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let _guard = self.relink.lock().await;
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let (params, version, backoff) = {
            let st = self.state.lock().unwrap();
            (st.init_params.clone(), st.version, st.restart_backoff)
        };
        let (Some(mut params), Some(version)) = (params, version) else {
            return Err(RpcError::new(INVALID_REQUEST, "session not initialized"));
        };
        if let Some((since, delay)) = backoff {
            tokio::time::sleep_until((since + delay).into()).await;
        }
        let link = self.start_link().await?;
        params["protocolVersion"] = version.as_str().into();
        let handshake = async {
            let resp = link.request("initialize", params).await?;
            if let Some(err) = resp.get("error") {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' refused to re-initialize: {err}", self.upstream.name),
                ));
            }
            let got = resp.pointer("/result/protocolVersion").and_then(Value::as_str);
            if got != Some(version.as_str()) {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' restarted with protocol version {got:?}, not {version}", self.upstream.name),
                ));
            }
            link.send(Message::made(jsonrpc::notification("notifications/initialized", json!({})))).await
        };
        match tokio::time::timeout(self.upstream.connect_timeout, handshake).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                link.close().await;
                return Err(e);
            }
            Err(_) => {
                link.close().await;
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!(
                        "upstream '{}' did not initialize within {:?}",
                        self.upstream.name, self.upstream.connect_timeout
                    ),
                ));
            }
        }
        tracing::info!(upstream = %self.upstream.name, generation = link.generation(), "upstream link restarted");
        *self.link.lock().unwrap() = Some(link.clone());
        Ok(link)
    }

    pub(super) async fn start_link(&self) -> Result<Arc<Link>, RpcError> {
        let generation = {
            let mut st = self.state.lock().unwrap();
            st.generation += 1;
            st.generation
        };
        let events: Weak<dyn LinkEvents> = self.me.clone();
        Link::connect(self.gateway.link_env(), &self.upstream, generation, events).await
    }
}
