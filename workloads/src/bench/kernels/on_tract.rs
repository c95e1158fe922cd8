//! The kernel problems as one-operator ONNX models, planned and run by tract.

use std::sync::Arc;

use greenpipe_workload_numeric::{f32_le_bytes, Draws};
use tract_onnx::prelude::*;

use super::super::deepbench::{self, Conv, Gemm};
use super::super::{BenchError, Env, Prepared, Work};
use super::Set;
use crate::model::graph::{int, ints, typed_value_info};
use crate::model::onnx::{
    tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto,
};
use crate::model::{tract::to_tract, ModelError, TractStep};

type Plan = Arc<TypedRunnableModel>;

/// A prepared problem: its DeepBench sizes (for errors), its plan, its input and its flop
/// count.
#[derive(Clone)]
struct Problem {
    name: String,
    plan: Plan,
    input: TValue,
    flops: u64,
}

fn plan(proto: &ModelProto) -> Result<Plan, ModelError> {
    crate::model::configure_tract();
    let model = tract_onnx::onnx()
        .model_for_proto_model(&to_tract(proto)?)
        .step("parsing the generated ONNX graph")?
        .into_optimized()
        .step("typing and optimising the model")?;
    model
        .into_runnable_with_options(&RunOptions {
            executor: Some(tract_linalg::multithread::Executor::SingleThread),
            ..Default::default()
        })
        .step("preparing the model to run")
}

/// Names the DeepBench problem whose model failed.
fn kernel_error(problem: &str) -> impl FnOnce(ModelError) -> BenchError + '_ {
    move |source| BenchError::Kernel {
        problem: problem.to_string(),
        source,
    }
}

fn raw_tensor(name: &str, dims: &[i64], dt: DataType, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: dt as i32,
        name: name.into(),
        raw_data: raw,
        ..Default::default()
    }
}

fn random_bytes(draws: &mut Draws, n: usize, int8: bool) -> Vec<u8> {
    if int8 {
        draws.uniform_i8_bytes(n, -64..64)
    } else {
        f32_le_bytes(&draws.uniform_f32(n, -1.0..1.0))
    }
}

fn scalar_f32(name: &str, v: f32) -> TensorProto {
    raw_tensor(name, &[], DataType::Float, v.to_le_bytes().to_vec())
}

fn scalar(name: &str, dt: DataType, v: u8) -> TensorProto {
    raw_tensor(name, &[], dt, vec![v])
}

/// Quantization parameters shared by every int8 problem: u8 activations around 128, i8
/// weights, output scale chosen so results mostly stay in range.
fn qparams(k_reduce: usize) -> Vec<TensorProto> {
    vec![
        scalar_f32("a_scale", 1.0 / 64.0),
        scalar("a_zero", DataType::Uint8, 128),
        scalar_f32("b_scale", 1.0 / 64.0),
        scalar("b_zero", DataType::Int8, 0),
        scalar_f32("y_scale", (k_reduce as f32).sqrt() / 64.0),
        scalar("y_zero", DataType::Uint8, 128),
    ]
}

fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, input: (&[i64], DataType)) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits,
            input: vec![typed_value_info("a", input.1, Some(input.0))],
            output: vec![typed_value_info("y", input.1, None)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        name: "y".into(),
        op_type: op.into(),
        attribute: attrs,
        ..Default::default()
    }
}

fn input_tensor(draws: &mut Draws, shape: &[usize], int8: bool) -> Result<TValue, ModelError> {
    let n: usize = shape.iter().product();
    let tensor = if int8 {
        Tensor::from_shape(shape, &draws.uniform_u8(n, 96..160))
    } else {
        Tensor::from_shape(shape, &draws.uniform_f32(n, -1.0..1.0))
    };
    Ok(tensor.step("shaping the input")?.into())
}

fn gemm_problem(p: &Gemm, int8: bool, draws: &mut Draws) -> Result<Problem, BenchError> {
    let name = format!("GEMM {p:?}");
    let (m, n, k) = (p.m as i64, p.n as i64, p.k as i64);
    let bdt = if int8 {
        DataType::Int8
    } else {
        DataType::Float
    };
    let b = raw_tensor("b", &[k, n], bdt, random_bytes(draws, p.k * p.n, int8));
    let proto = if int8 {
        let mut inits = qparams(p.k);
        inits.push(b);
        model(
            vec![node(
                "QLinearMatMul",
                &[
                    "a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero",
                ],
                vec![],
            )],
            inits,
            (&[m, k], DataType::Uint8),
        )
    } else {
        model(
            vec![node("MatMul", &["a", "b"], vec![])],
            vec![b],
            (&[m, k], DataType::Float),
        )
    };
    Ok(Problem {
        plan: plan(&proto).map_err(kernel_error(&name))?,
        input: input_tensor(draws, &[p.m, p.k], int8).map_err(kernel_error(&name))?,
        flops: p.flops(),
        name,
    })
}

fn conv_problem(p: &Conv, int8: bool, draws: &mut Draws) -> Result<Problem, BenchError> {
    let name = format!("convolution {p:?}");
    let wdt = if int8 {
        DataType::Int8
    } else {
        DataType::Float
    };
    let w_dims = [p.k as i64, p.c as i64, p.r as i64, p.s as i64];
    let w = raw_tensor(
        "w",
        &w_dims,
        wdt,
        random_bytes(draws, p.k * p.c * p.r * p.s, int8),
    );
    let attrs = vec![
        ints("kernel_shape", &[p.r as i64, p.s as i64]),
        ints("strides", &[p.stride_h as i64, p.stride_w as i64]),
        ints(
            "pads",
            &[
                p.pad_h as i64,
                p.pad_w as i64,
                p.pad_h as i64,
                p.pad_w as i64,
            ],
        ),
        int("group", 1),
    ];
    let in_dims = [p.n as i64, p.c as i64, p.h as i64, p.w as i64];
    let proto = if int8 {
        let mut inits = qparams(p.c * p.r * p.s);
        inits.push(w);
        model(
            vec![node(
                "QLinearConv",
                &[
                    "a", "a_scale", "a_zero", "w", "b_scale", "b_zero", "y_scale", "y_zero",
                ],
                attrs,
            )],
            inits,
            (&in_dims, DataType::Uint8),
        )
    } else {
        model(
            vec![node("Conv", &["a", "w"], attrs)],
            vec![w],
            (&in_dims, DataType::Float),
        )
    };
    Ok(Problem {
        plan: plan(&proto).map_err(kernel_error(&name))?,
        input: input_tensor(draws, &[p.n, p.c, p.h, p.w], int8).map_err(kernel_error(&name))?,
        flops: p.flops(),
        name,
    })
}

fn workers(env: &Env, problems: Vec<Problem>) -> Vec<Work> {
    let problems = Arc::new(problems);
    (0..env.threads)
        .map(|i| {
            let problems = problems.clone();
            let mut next = i;
            Box::new(move || {
                let p = &problems[next % problems.len()];
                next += 1;
                p.plan
                    .run(tvec!(p.input.clone()))
                    .step("running the model")
                    .map_err(kernel_error(&p.name))?;
                Ok(p.flops)
            }) as Work
        })
        .collect()
}

pub(super) fn gemm(env: &Env, int8: bool) -> Result<Prepared, BenchError> {
    let set = env.kernel_set;
    let table: &[Gemm] = match set {
        Set::Device => &deepbench::GEMM_DEVICE,
        Set::Server => &deepbench::GEMM_SERVER,
    };
    let mut draws = Draws::seeded(env.seed);
    let (mut problems, mut skipped) = (Vec::new(), Vec::new());
    for p in table {
        if p.bytes_f32() > env.kernel_max_bytes {
            skipped.push(serde_json::json!([p.m, p.n, p.k]));
            continue;
        }
        problems.push(gemm_problem(p, int8, &mut draws)?);
    }
    if problems.is_empty() {
        return Err(BenchError::TooLarge {
            kind: "GEMM",
            max_bytes: env.kernel_max_bytes,
        });
    }
    Ok(Prepared {
        params: serde_json::json!({
            "source": "baidu-research/DeepBench code/kernels/gemm_problems.h",
            "set": set.name(),
            "precision": if int8 { "int8" } else { "f32" },
            "problems": problems.len(),
            "skipped_mnk": skipped,
        }),
        workers: workers(env, problems),
        guard: None,
    })
}

pub(super) fn conv(env: &Env, int8: bool) -> Result<Prepared, BenchError> {
    let set = env.kernel_set;
    let table: &[Conv] = match set {
        Set::Device => &deepbench::CONV_DEVICE,
        Set::Server => &deepbench::CONV_SERVER,
    };
    let mut draws = Draws::seeded(env.seed);
    let (mut problems, mut skipped) = (Vec::new(), Vec::new());
    for p in table {
        if p.bytes_f32() > env.kernel_max_bytes {
            skipped.push(serde_json::json!([p.w, p.h, p.c, p.n, p.k, p.s, p.r]));
            continue;
        }
        problems.push(conv_problem(p, int8, &mut draws)?);
    }
    if problems.is_empty() {
        return Err(BenchError::TooLarge {
            kind: "convolution",
            max_bytes: env.kernel_max_bytes,
        });
    }
    Ok(Prepared {
        params: serde_json::json!({
            "source": "baidu-research/DeepBench code/kernels/conv_problems.h",
            "set": set.name(),
            "precision": if int8 { "int8" } else { "f32" },
            "problems": problems.len(),
            "skipped_whcnksr": skipped,
        }),
        workers: workers(env, problems),
        guard: None,
    })
}
